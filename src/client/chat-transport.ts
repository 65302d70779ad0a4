/**
 * @module client/chat-transport
 * Internal: not part of the public API (the package exports only its index modules).
 * `StepwiseChatTransport`: the AI SDK's `ChatTransport` over a Stepwise chat task, so `useChat`
 * (`@ai-sdk/react`) talks to a durable session. A chat (the page's `chatId`) is one task of the
 * chat workflow while the session lives: the first message starts it with the conversation so far
 * as `history`; each message is a `chat:message` signal (keyed by the message's id, so a resent
 * message counts once); the answer is read from the task's token stream, the frames of the step
 * named `reply:<message id>`, turned into UI message chunks (text, usage as message metadata). A
 * session that ended (idle, stopped, failed) is followed by a new one with the history.
 *
 * `reconnectToStream` resumes an answer in progress after a page reload: it replays the answer's
 * frames from its start (`resumeStreamIsReplay`), then follows it live. Stop (the request's abort,
 * or `stop(chatId)`) cancels the session's task, which closes the model's stream; the next message starts a new
 * session with the conversation. A retried attempt's reset frame ends the text part of the attempt
 * that broke off, and the retry streams into a new text part: show a message's last text part.
 */
import { refuseUnknownOptions } from './options.ts';
import type { ChatRequestOptions, ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import { CHAT_MESSAGE_SIGNAL, messageKey, replyStep, type ChatMessage } from '../chat-protocol.ts';
import { StepwiseHttpError, type StepwiseClient, type StreamItem } from './client.ts';

/** Where the transport remembers each chat's session across page loads: `sessionStorage` fits. */
export interface ChatSessionStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface StepwiseChatTransportOptions {
  client: StepwiseClient;
  /** The chat workflow (written with `chatMessages` of `stepwise-engine/ai`). */
  workflow: string;
  /** The input a new session starts with. @defaultValue `{ chatId, history }` */
  input?: (chat: { chatId: string; history: ChatMessage[] }) => unknown;
  /** @defaultValue the page's `sessionStorage`, or memory where there is none */
  sessions?: ChatSessionStore;
}

/** A chat's live session: its task, the message being answered, and the stream position before it. */
interface Session {
  taskId: string;
  pending: string | null;
  after: string;
}

/** A session in these statuses takes no more messages (a cancelling one is on its way to cancelled). */
const ENDED = new Set(['succeeded', 'failed', 'cancelled', 'cancelling']);

export class StepwiseChatTransport<UI extends UIMessage = UIMessage> implements ChatTransport<UI> {
  readonly resumeStreamIsReplay = true;
  readonly #o: StepwiseChatTransportOptions;
  readonly #sessions: ChatSessionStore;

  constructor(options: StepwiseChatTransportOptions) {
    refuseUnknownOptions(options, ['client', 'workflow', 'input', 'sessions'], 'new StepwiseChatTransport()');
    this.#o = options;
    this.#sessions = options.sessions ?? (globalThis as { sessionStorage?: ChatSessionStore }).sessionStorage ?? memoryStore();
  }

  async sendMessages(
    options: { trigger: 'submit-message' | 'regenerate-message'; chatId: string; messageId: string | undefined; messages: UI[]; abortSignal: AbortSignal | undefined } & ChatRequestOptions,
  ): Promise<ReadableStream<UIMessageChunk>> {
    if (options.trigger !== 'submit-message') throw new Error('StepwiseChatTransport: regenerating an answer is not supported; send the message again.');
    const last = options.messages.at(-1);
    if (!last || last.role !== 'user') throw new Error('StepwiseChatTransport: the last message to send must be the user’s.');
    const message: ChatMessage = { id: last.id, role: 'user', text: textOf(last) };
    let session = this.#load(options.chatId);
    if (session && !(await this.#deliver(session.taskId, message))) session = null;
    if (!session) {
      const history = options.messages.slice(0, -1).map((m): ChatMessage => ({ id: m.id, role: m.role === 'user' ? 'user' : 'assistant', text: textOf(m) }));
      const input = this.#o.input ? this.#o.input({ chatId: options.chatId, history }) : { chatId: options.chatId, history };
      const task = await this.#o.client.start(this.#o.workflow, input, { idempotencyKey: `chat:${options.chatId}:${message.id}` });
      await this.#o.client.signal(task.id, CHAT_MESSAGE_SIGNAL, message, { idempotencyKey: messageKey(message.id) });
      session = { taskId: task.id, pending: null, after: '0.0' };
    }
    const live = { ...session, pending: message.id };
    this.#save(options.chatId, live);
    return this.#answer(options.chatId, live, options.abortSignal);
  }

  async reconnectToStream(options: { chatId: string } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk> | null> {
    const session = this.#load(options.chatId);
    if (!session?.pending) return null;
    return this.#answer(options.chatId, session, undefined);
  }

  /**
   * Stops the chat's answer in progress: its session's task is cancelled (the model's stream
   * closes, and a stream that follows the answer ends with an `abort` chunk); the next message
   * starts a new session with the conversation so far. Sending with an `abortSignal` that aborts
   * does the same.
   */
  async stop(chatId: string): Promise<void> {
    const session = this.#load(chatId);
    this.#sessions.removeItem(keyOf(chatId));
    if (!session) return;
    await this.#o.client.cancel(session.taskId, { reason: 'stopped from the chat page' }).catch((e: unknown) => {
      // Ended already: nothing to stop.
      if (!(e instanceof StepwiseHttpError && e.status === 409)) throw e;
    });
  }

  /** Sends the message into a live session; false when the session can take no more (it ended). */
  async #deliver(taskId: string, message: ChatMessage): Promise<boolean> {
    try {
      // The answer carries the task's status (no read of the whole session per message): a failed
      // task keeps signals for a retry, and the conversation goes on in a new session.
      const sent = await this.#o.client.signal(taskId, CHAT_MESSAGE_SIGNAL, message, { idempotencyKey: messageKey(message.id) });
      return !ENDED.has(sent.status);
    } catch (e) {
      if (e instanceof StepwiseHttpError && (e.status === 404 || e.status === 409)) return false;
      throw e;
    }
  }

  /** The answer to the pending message as UI message chunks, read from the task's stream. */
  #answer(chatId: string, session: Session, abortSignal: AbortSignal | undefined): ReadableStream<UIMessageChunk> {
    const step = replyStep(session.pending as string);
    const stop = new AbortController();
    const onAbort = (): void => {
      stop.abort();
      void this.stop(chatId);
    };
    if (abortSignal?.aborted) onAbort();
    else abortSignal?.addEventListener('abort', onAbort, { once: true });
    const items = this.#o.client.stream(session.taskId, { log: true, after: session.after, signal: stop.signal });
    let part: string | null = null;
    let parts = 0;
    const settle = (done: 'answered' | 'ended', after: string): void => {
      if (done === 'answered') this.#save(chatId, { taskId: session.taskId, pending: null, after });
      else this.#sessions.removeItem(keyOf(chatId));
    };
    return new ReadableStream<UIMessageChunk>({
      async start(controller) {
        controller.enqueue({ type: 'start' });
        try {
          for await (const item of items) {
            const out = chunksOf(item, step, part, () => `${step}#${++parts}`);
            part = out.part;
            for (const c of out.chunks) controller.enqueue(c);
            if (out.done) {
              settle(out.done, item.id);
              controller.close();
              return;
            }
          }
          if (stop.signal.aborted) controller.enqueue({ type: 'abort', reason: 'stopped' });
          else controller.enqueue({ type: 'error', errorText: 'The chat session ended before it answered.' });
          controller.close();
        } catch (e) {
          controller.enqueue({ type: 'error', errorText: e instanceof Error ? e.message : String(e) });
          controller.close();
        } finally {
          abortSignal?.removeEventListener('abort', onAbort);
        }
      },
      cancel() {
        stop.abort();
      },
    });
  }

  #load(chatId: string): Session | null {
    const raw = this.#sessions.getItem(keyOf(chatId));
    if (!raw) return null;
    try {
      return JSON.parse(raw) as Session;
    } catch {
      return null;
    }
  }

  #save(chatId: string, session: Session): void {
    this.#sessions.setItem(keyOf(chatId), JSON.stringify(session));
  }
}

/** The UI chunks one stream item makes for the answer in `step`, and whether the answer is over. */
function chunksOf(item: StreamItem, step: string, part: string | null, newPart: () => string): { chunks: UIMessageChunk[]; part: string | null; done: false | 'answered' | 'ended' } {
  const chunks: UIMessageChunk[] = [];
  const entry = item as Record<string, unknown>;
  if (item.type === 'stream:delta' || item.type === 'stream:reset') {
    if (entry.step !== step) return { chunks, part, done: false };
    // A reset: the attempt that broke off keeps its part; the retry streams into a new one.
    if (item.type === 'stream:reset') {
      if (part) chunks.push({ type: 'text-end', id: part });
      return { chunks, part: null, done: false };
    }
    if (!part) {
      part = newPart();
      chunks.push({ type: 'text-start', id: part });
    }
    chunks.push({ type: 'text-delta', id: part, delta: String(entry.delta) });
    return { chunks, part, done: false };
  }
  const stepName = (entry.step as { name?: string } | undefined)?.name;
  if (item.type === 'usage:attempt' && (entry.usage as { step?: string } | undefined)?.step === step) {
    chunks.push({ type: 'message-metadata', messageMetadata: { usage: entry.usage } });
  } else if (item.type === 'step:completed' && stepName === step) {
    if (part) chunks.push({ type: 'text-end', id: part });
    chunks.push({ type: 'finish' });
    return { chunks, part: null, done: 'answered' };
  } else if (item.type === 'step:failed' && stepName === step) {
    const error = (entry.step as { error?: { message?: string } }).error;
    chunks.push({ type: 'error', errorText: error?.message ?? 'The answer failed.' });
    return { chunks, part: null, done: 'ended' };
  } else if (item.type === 'transition' && entry.to === 'cancelled') {
    chunks.push({ type: 'abort', reason: 'the chat session was cancelled' });
    return { chunks, part: null, done: 'ended' };
  } else if (item.type === 'transition' && entry.to === 'failed') {
    chunks.push({ type: 'error', errorText: 'The chat session failed.' });
    return { chunks, part: null, done: 'ended' };
  }
  return { chunks, part, done: false };
}

function textOf(m: UIMessage): string {
  return m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

const keyOf = (chatId: string): string => `stepwise-chat:${chatId}`;

function memoryStore(): ChatSessionStore {
  const m = new Map<string, string>();
  return { getItem: (k) => m.get(k) ?? null, setItem: (k, v) => void m.set(k, v), removeItem: (k) => void m.delete(k) };
}
