// A local OpenAI-compatible model for the stream bench: `POST /v1/chat/completions` with
// `stream: true` and `model: "stamp:<chunks>:<gapMs>"` answers with that many chunks, each one's
// text the wall-clock time at which it was written (`<ms with µs>;`, comparable across processes
// of one machine), `gapMs` apart (0: each on its own event-loop turn, as fast as the socket
// takes them). `model: "stamp:<chunks>:<gapMs>:<waitMs>"` waits that long before the first chunk.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Now as wall-clock milliseconds with sub-millisecond precision. */
export const wallMs = (): number => performance.timeOrigin + performance.now();

export interface StampModel {
  baseURL: string;
  close(): Promise<void>;
}

export async function startStampModel(): Promise<StampModel> {
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (part) => (raw += String(part)));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as { model?: string };
      const [kind, chunks, gap, wait] = String(body.model).split(':');
      if (kind !== 'stamp' || req.method !== 'POST') {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `the stamp model takes model "stamp:<chunks>:<gapMs>", got ${String(body.model)}` } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const send = (delta: Record<string, unknown>, finish: string | null = null): void => {
        res.write(`data: ${JSON.stringify({ id: 'stamp', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
      };
      send({ role: 'assistant', content: '' });
      void (async () => {
        await new Promise((r) => setTimeout(r, Number(wait ?? 0)));
        for (let i = 0; i < Number(chunks); i++) {
          if (res.destroyed) return;
          await new Promise((r) => (Number(gap) > 0 ? setTimeout(r, Number(gap)) : setImmediate(r)));
          send({ content: `${wallMs().toFixed(3)};` });
        }
        send({}, 'stop');
        res.end('data: [DONE]\n\n');
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
