// A local OpenAI-compatible HTTP server for tests: `POST /v1/chat/completions`, answered from a
// script of replies (one per request, in order; the last one repeats). It speaks the real wire
// format — JSON bodies, and SSE streams of `chat.completion.chunk` objects ending in `[DONE]`, with
// usage in the last chunk when `stream_options.include_usage` asks for it — so the real `openai`
// client (and the AI SDK over it) runs its own code path. Replies can be errors (429 with
// `Retry-After`, 500), tool calls, or streams that stall after some chunks. Every request is
// recorded with its body, its headers, and whether the client closed the connection before the
// reply ended (what a cancel mid-stream must cause).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens served from the provider's cache. */
  cached_tokens?: number;
  reasoning_tokens?: number;
}

export type FakeReply =
  /** A completion: its text in `chunks` (streamed one chunk per SSE event; joined otherwise). */
  | {
      kind: 'text';
      chunks: string[];
      usage?: FakeUsage;
      model?: string;
      stallAfter?: number;
      /** With stallAfter: the stall ends (the rest is sent) when this resolves. */
      resume?: Promise<void>;
      /** After the last chunk, the stream stays open without finishing. */
      hangAtEnd?: boolean;
    }
  /** The model asks for tool calls (`arguments` is JSON text). */
  | { kind: 'tools'; calls: Array<{ id: string; name: string; arguments: string }>; usage?: FakeUsage }
  /** An HTTP error: 429 (with `retryAfter` seconds in the header), 500, … */
  | { kind: 'error'; status: number; retryAfter?: number; message?: string };

export interface RecordedRequest {
  /** 1, 2, 3… in arrival order. */
  n: number;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** Streamed chunks written so far. */
  chunksSent: number;
  /** The reply was written to its end. */
  finished: boolean;
  /** The client closed the connection before the reply ended. */
  closedByClient: boolean;
  /** Resolves when the connection ends, either way. */
  ended: Promise<void>;
}

export interface FakeOpenAI {
  /** `http://127.0.0.1:<port>/v1`: give it to the client as `baseURL`. */
  readonly baseURL: string;
  readonly requests: RecordedRequest[];
  /** Replaces the script: request n gets `replies[n-1]` (the last one repeats once they run out). */
  script(replies: FakeReply[]): void;
  /** Resolves when request `n` has arrived (and, with `chunks`, has sent that many chunks). */
  waitForRequest(n: number, chunks?: number): Promise<RecordedRequest>;
  close(): Promise<void>;
}

const text = (s: string): { kind: 'text'; chunks: string[] } => ({ kind: 'text', chunks: [s] });
export { text as textReply };

function usageJson(u: FakeUsage | undefined): Record<string, unknown> | undefined {
  if (!u) return undefined;
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
  };
}

export async function startFakeOpenAI(initial: FakeReply[] = [text('hello')]): Promise<FakeOpenAI> {
  let replies = initial;
  const requests: RecordedRequest[] = [];
  const waiters: Array<() => void> = [];
  const changed = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  const sockets = new Set<import('node:net').Socket>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let raw = '';
    for await (const part of req) raw += String(part);
    let endResolve!: () => void;
    const rec: RecordedRequest = {
      n: requests.length + 1,
      path: req.url ?? '',
      headers: req.headers,
      body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {},
      chunksSent: 0,
      finished: false,
      closedByClient: false,
      ended: new Promise<void>((r) => (endResolve = r)),
    };
    requests.push(rec);
    res.on('close', () => {
      if (!rec.finished) rec.closedByClient = true;
      endResolve();
      changed();
    });
    changed();
    if (req.method !== 'POST' || !rec.path.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      rec.finished = true;
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${rec.path}`, type: 'invalid_request_error' } }));
      return;
    }
    const reply = replies[Math.min(rec.n - 1, replies.length - 1)] as FakeReply;
    const model = String(rec.body.model ?? 'fake-model');
    const id = `chatcmpl-${rec.n}`;
    const created = 1_764_579_600; // a fixed time: replies are reproducible
    if (reply.kind === 'error') {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (reply.retryAfter !== undefined) headers['retry-after'] = String(reply.retryAfter);
      res.writeHead(reply.status, headers);
      rec.finished = true;
      res.end(JSON.stringify({ error: { message: reply.message ?? `fake error ${reply.status}`, type: reply.status === 429 ? 'rate_limit_exceeded' : 'server_error' } }));
      return;
    }
    const message =
      reply.kind === 'text'
        ? { role: 'assistant', content: reply.chunks.join('') }
        : { role: 'assistant', content: null, tool_calls: reply.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) };
    const finish = reply.kind === 'text' ? 'stop' : 'tool_calls';
    if (!rec.body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      rec.finished = true;
      res.end(JSON.stringify({ id, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: finish, logprobs: null }], usage: usageJson(reply.usage) }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.flushHeaders();
    const send = (chunk: Record<string, unknown>): void => {
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, ...chunk })}\n\n`);
    };
    send({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    if (reply.kind === 'text') {
      for (const [i, c] of reply.chunks.entries()) {
        if (reply.stallAfter !== undefined && i === reply.stallAfter) {
          changed();
          if (!reply.resume) return; // stalls: the connection stays open until the client gives up
          await reply.resume;
        }
        // Each chunk goes out on its own event loop turn, as a provider's tokens do.
        await new Promise((r) => setImmediate(r));
        if (res.destroyed) return;
        send({ choices: [{ index: 0, delta: { content: c }, finish_reason: null }] });
        rec.chunksSent++;
        changed();
      }
    } else {
      reply.calls.forEach((c, index) => {
        send({ choices: [{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }, finish_reason: null }] });
        send({ choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: c.arguments } }] }, finish_reason: null }] });
      });
    }
    if (reply.kind === 'text' && ((reply.stallAfter !== undefined && reply.stallAfter >= reply.chunks.length && !reply.resume) || reply.hangAtEnd)) {
      changed();
      return;
    }
    send({ choices: [{ index: 0, delta: {}, finish_reason: finish }] });
    const options = rec.body.stream_options as { include_usage?: boolean } | undefined;
    if (options?.include_usage) send({ choices: [], usage: usageJson(reply.usage) ?? null });
    rec.finished = true;
    res.end('data: [DONE]\n\n');
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    script(next) {
      replies = next;
    },
    async waitForRequest(n, chunks) {
      for (;;) {
        const r = requests[n - 1];
        if (r && (chunks === undefined || r.chunksSent >= chunks)) return r;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
