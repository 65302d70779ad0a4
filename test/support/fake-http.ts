// A local HTTP server that answers from a script, one response per request, so the real client
// libraries (the openai client, fetch) take their real code paths against it.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterEach } from 'vitest';

export interface ScriptedResponse {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}

export interface FakeHttp {
  url: string;
  /** Requests received, in order (method, path, parsed JSON body). */
  requests: Array<{ method: string; path: string; body: unknown }>;
  close(): Promise<void>;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
});

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}

/** Serves `script` in order; after the last entry, the last one again. */
export async function fakeHttp(script: ScriptedResponse[]): Promise<FakeHttp> {
  const requests: FakeHttp['requests'] = [];
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      requests.push({ method: req.method ?? '', path: req.url ?? '', body });
      const r = script[Math.min(requests.length - 1, script.length - 1)] as ScriptedResponse;
      res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers });
      res.end(JSON.stringify(r.body));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** An OpenAI chat completion answer with `text`. */
export function chatCompletion(text: string): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-test',
    choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: text } }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** An OpenAI error answer. */
export function openaiError(message: string, type: string, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
}
