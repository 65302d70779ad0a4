/**
 * An offline stand-in for a model provider, so that the example runs with no API key: a local
 * HTTP server that speaks the OpenAI chat-completions protocol (JSON and SSE streams with usage),
 * so the agent's real client code path runs unchanged. Its "policy" is a fixed research routine:
 * asked a question, it calls the `search` tool; given search results, it calls `read` on the best
 * one; given a document, it streams an answer quoting it, a few words at a time (slowly enough to
 * be cancelled or killed mid-stream). Usage is counted at ~4 characters a token.
 *
 * With a real provider none of this runs: see the README ("research-agent").
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Message {
  role: string;
  content?: string | null;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
}

const tokens = (s: string): number => Math.ceil(s.length / 4);

/** What the routine does next, from the conversation so far. */
function decide(messages: Message[]): { tool: { name: string; args: Record<string, unknown> } } | { answer: string } {
  const question = messages.find((m) => m.role === 'user')?.content ?? '';
  const toolResults = messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));
  const calledRead = messages.some((m) => m.tool_calls?.some((c) => c.function.name === 'read'));
  if (!toolResults.length) return { tool: { name: 'search', args: { query: question } } };
  if (!calledRead) {
    const hits = JSON.parse(toolResults[toolResults.length - 1] ?? '[]') as Array<{ doc: string }>;
    if (hits[0]) return { tool: { name: 'read', args: { doc: hits[0].doc } } };
    return { answer: `I found nothing on "${question}" in the library.` };
  }
  const doc = toolResults[toolResults.length - 1] ?? '';
  const sentences = doc
    .replace(/^#.*$/gm, '')
    .split(/(?<=[.!?])\s+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 30)
    .slice(0, 3);
  return { answer: `From the library, on "${question}": ${sentences.join(' ')}` };
}

export interface OfflineModel {
  readonly baseURL: string;
  /** Requests answered or begun so far (a repeated call counts again). */
  readonly requests: number;
  /** Streamed answers under way now. */
  readonly streaming: number;
  /** Streamed answers whose client hung up before their end (a cancelled or killed caller). */
  readonly hungUp: number;
  close(): Promise<void>;
}

/** What the stand-in answers to a conversation: a tool call, or text it streams a word at a time. */
export type OfflinePolicy = (messages: Message[]) => ReturnType<typeof decide>;

/**
 * Starts the server on a free local port. `paceMs`: pause between streamed words; `policy`: what
 * it answers (the research routine by default).
 */
export async function startOfflineModel(options: { paceMs?: number; policy?: OfflinePolicy } = {}): Promise<OfflineModel> {
  const paceMs = options.paceMs ?? 40;
  const policy = options.policy ?? decide;
  let requests = 0;
  let hungUp = 0;
  let streaming = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      void (async () => {
        requests++;
        const body = JSON.parse(raw || '{}') as { model?: string; messages?: Message[]; stream?: boolean };
        const messages = body.messages ?? [];
        const model = body.model ?? 'offline-researcher';
        const prompt = tokens(JSON.stringify(messages));
        const next = policy(messages);
        const id = `chatcmpl-offline-${Date.now()}`;
        const created = Math.floor(Date.now() / 1000);
        const call =
          'tool' in next ? { id: `call-${next.tool.name}-${messages.length}`, type: 'function', function: { name: next.tool.name, arguments: JSON.stringify(next.tool.args) } } : null;
        const text = 'answer' in next ? next.answer : '';
        const usage = { prompt_tokens: prompt, completion_tokens: call ? tokens(call.function.arguments) : tokens(text), total_tokens: 0 };
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
        if (!body.stream) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              id,
              object: 'chat.completion',
              created,
              model,
              usage,
              choices: [{ index: 0, finish_reason: call ? 'tool_calls' : 'stop', message: { role: 'assistant', content: call ? null : text, ...(call ? { tool_calls: [call] } : {}) } }],
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        let ended = false;
        streaming++;
        res.once('close', () => {
          streaming--;
          if (!ended) hungUp++;
        });
        const send = (chunk: object): boolean => res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, ...chunk })}\n\n`);
        send({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
        if (call) {
          send({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...call }] }, finish_reason: null }] });
        } else {
          for (const word of text.split(/(?<= )/)) {
            await new Promise((r) => setTimeout(r, paceMs));
            if (res.destroyed) return; // the client hung up (a cancel): stop generating
            send({ choices: [{ index: 0, delta: { content: word }, finish_reason: null }] });
          }
        }
        send({ choices: [{ index: 0, delta: {}, finish_reason: call ? 'tool_calls' : 'stop' }] });
        send({ choices: [], usage });
        ended = true;
        res.end('data: [DONE]\n\n');
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    get requests() {
      return requests;
    },
    get streaming() {
      return streaming;
    },
    get hungUp() {
      return hungUp;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
