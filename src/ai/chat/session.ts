/**
 * @module ai/chat/session
 * Chat sessions as durable tasks: a task that answers a person's messages one at a time, parked
 * (no worker slot held) while it waits for the next one, until the person goes quiet for `idle`.
 * Each message arrives as a signal (see chat-protocol.ts); each answer is a step of its own —
 * usually a streaming model step named {@link replyStep} — so a crash or a deploy resumes the
 * session where it stopped, and a page that reloads replays the answer's tokens.
 * @example
 * export const chat = workflow('chat', async (ctx, input: ChatInput) => {
 *   const transcript = [...(input.history ?? [])];
 *   for await (const message of chatMessages(ctx, { idle: '30m' })) {
 *     transcript.push(message);
 *     const reply = await streamText(ctx, replyStep(message.id), { model, messages: toModelMessages(transcript) });
 *     transcript.push({ id: `${message.id}:reply`, role: 'assistant', text: reply.text });
 *   }
 * });
 */
import { toMs, type Duration } from '../../duration.ts';
import { InvalidArgumentError } from '../../errors.ts';
import { CHAT_MESSAGE_SIGNAL, type ChatMessage } from '../../chat-protocol.ts';
import type { WorkflowContext } from '../../workflow.ts';

export { CHAT_MESSAGE_SIGNAL, replyStep, type ChatMessage } from '../../chat-protocol.ts';

/** The input a chat page's transport starts a session with. */
export interface ChatInput {
  /** The page's id of the chat. */
  chatId?: string;
  /** The conversation before this session (a session that ended, or was stopped, goes on in a new one). */
  history?: ChatMessage[];
}

export interface ChatMessagesOptions {
  /** The session ends after this long without a message. @defaultValue '30m' */
  idle?: Duration;
}

/**
 * The user's messages to this chat task, as they come; the iteration ends when none came for
 * `idle`. Each wait is a durable `waitForEvent`: replay hands back the same messages in the same
 * order. A payload that is not a message (`{ id, text }`) fails the task with INVALID_ARGUMENT.
 */
export async function* chatMessages(ctx: WorkflowContext, options: ChatMessagesOptions = {}): AsyncGenerator<ChatMessage> {
  const idle = options.idle ?? '30m';
  toMs(idle, 'chatMessages({ idle })');
  for (;;) {
    const e = await ctx.waitForEvent<unknown>(CHAT_MESSAGE_SIGNAL, { timeout: idle });
    if (e.timedOut) return;
    yield asMessage(e.payload);
  }
}

function asMessage(payload: unknown): ChatMessage {
  const m = payload as Partial<ChatMessage> | null;
  if (typeof m !== 'object' || m === null || typeof m.id !== 'string' || !m.id || typeof m.text !== 'string') {
    throw new InvalidArgumentError(`chatMessages(): a "${CHAT_MESSAGE_SIGNAL}" signal carries { id, text } (strings), got ${JSON.stringify(payload)?.slice(0, 200)}.`);
  }
  return { id: m.id, role: 'user', text: m.text };
}
