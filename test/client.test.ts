// stepwise-engine/client against a real listening server (Node's fetch, the same code a page runs):
// commands with typed errors, and a task's token stream that survives a dropped connection — the
// client comes back with Last-Event-ID and the page sees every token once.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { workflow, type Engine } from '../src/index.ts';
import { chatCompletion } from '../src/ai/index.ts';
import { StepwiseClient, StepwiseHttpError, type StreamItem } from '../src/client/index.ts';
import { readSse } from '../src/client/sse.ts';
import { createServer } from '../src/server/index.ts';
import { gate, makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { TOKENS, tokenOf } from './support/server.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';
import { review } from './fixtures/server-workflows.ts';

let fake: FakeOpenAI;
let openai: OpenAI;
const closers: Array<() => Promise<void>> = [];
beforeEach(async () => {
  fake = await startFakeOpenAI();
  openai = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL, maxRetries: 0 });
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await fake.close();
});

const writer = workflow('writer', async (ctx) => {
  const r = await chatCompletion(ctx, 'write', openai, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
  return r.choices[0]?.message.content;
});

async function serve(engine: Engine): Promise<{ url: string; port: number }> {
  const listening = await createServer(engine, { tokens: TOKENS }).listen({ port: 0, hostname: '127.0.0.1' });
  closers.push(() => listening.close());
  return listening;
}

describe('stepwise-engine/client', () => {
  it('starts, reads, signals and decides through the HTTP API, and reports refusals as StepwiseHttpError with the stable code', async () => {
    const engine = makeEngine({ workflows: [review] });
    await startWorker(engine);
    const { url } = await serve(engine);
    const operator = new StepwiseClient({ baseUrl: url, token: tokenOf('oscar') });
    const started = await operator.start('review', { title: 'Durable agents' }, { idempotencyKey: 'review-1' });
    expect(started).toMatchObject({ status: 'pending', created: true });
    expect(await operator.start('review', { title: 'Durable agents' }, { idempotencyKey: 'review-1' })).toMatchObject({ id: started.id, created: false });
    await waitForStatus(engine, started.id, 'waiting');
    const approval = (await engine.approvals({ taskId: started.id }))[0];
    // An operator may not decide; alice may.
    const refused = await operator.decide(approval?.id as string, { approve: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StepwiseHttpError);
    expect(refused).toMatchObject({ status: 403 });
    const alice = new StepwiseClient({ baseUrl: `${url}/`, token: tokenOf('alice') });
    expect(await alice.decide(approval?.id as string, { approve: true, comment: 'ship it' })).toMatchObject({ status: 'approved' });
    await waitForStatus(engine, started.id, 'succeeded');
    expect(await operator.get(started.id)).toMatchObject({ id: started.id, status: 'succeeded' });
    const missing = await operator.get('0000000000000000000000000z').catch((e: unknown) => e);
    expect(missing).toMatchObject({ name: 'StepwiseHttpError', status: 404, code: 'TASK_NOT_FOUND' });
    const bad = await operator.signal(started.id, 'bad%name').catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(StepwiseHttpError);
    const anonymous = await new StepwiseClient({ baseUrl: url }).get(started.id).catch((e: unknown) => e);
    expect(anonymous).toMatchObject({ status: 401 });
    expect(() => new StepwiseClient()).toThrow(/baseUrl/);
  });

  it('follows a task’s tokens and, after the connection drops mid-answer, reconnects with Last-Event-ID: every token once, in order', async () => {
    const release = gate();
    fake.script([{ kind: 'text', chunks: ['Durable ', 'agents ', 'survive ', 'dropped ', 'connections.'], stallAfter: 2, resume: release.promise }]);
    const engine = makeEngine({ workflows: [writer] });
    await startWorker(engine);
    const { port } = await serve(engine);
    const proxy: TcpProxy = await startTcpProxy(port);
    closers.push(() => proxy.close());
    const client = new StepwiseClient({ baseUrl: `http://127.0.0.1:${proxy.port}`, token: tokenOf('vera'), reconnectMs: 50 });
    const { id } = await engine.start(writer);

    const items: StreamItem[] = [];
    let text = '';
    for await (const item of client.stream(id, { log: true })) {
      items.push(item);
      if (item.type === 'stream:delta') text += (item as { delta: string }).delta;
      if (text === 'Durable agents ') {
        // The network drops under the open stream; it comes back before the model goes on.
        proxy.cut();
        setTimeout(() => {
          proxy.restore();
          release.open();
        }, 200);
      }
    }
    expect(text).toBe('Durable agents survive dropped connections.');
    // It came back on a new connection and went on after the last id it had handed out.
    expect(proxy.accepted).toBeGreaterThanOrEqual(2);
    const ids = items.map((i) => i.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(items.at(-1)).toMatchObject({ type: 'transition', to: 'succeeded' });
    expect(await engine.result(id)).toBe('Durable agents survive dropped connections.');
  });

  it('ends a stream when its signal aborts, and refuses an unknown task at once', async () => {
    const engine = makeEngine({ workflows: [writer] });
    const { url } = await serve(engine);
    const client = new StepwiseClient({ baseUrl: url, token: tokenOf('vera') });
    const { id } = await engine.start(writer);
    const abort = new AbortController();
    const seen: StreamItem[] = [];
    // Aborted once the task's first entry has come: the stream then ends without an error.
    for await (const item of client.stream(id, { log: true, signal: abort.signal })) {
      seen.push(item);
      abort.abort();
    }
    expect(seen.map((i) => i.type)).toEqual(['transition']);
    const unknown = client.stream('0000000000000000000000000z')[Symbol.asyncIterator]().next();
    await expect(unknown).rejects.toMatchObject({ code: 'TASK_NOT_FOUND', status: 404 });
  });
});

describe('the SSE parser', () => {
  it('splits messages on blank lines across chunk boundaries, joins multi-line data, and skips comments', async () => {
    const parts = ['id: 1.2\nevent: stream:delta\ndata: {"a"', ':1}\n\n: keep-alive\n\nretry: 500\nevent: ready\ndata: {}\r\n\r\n', 'data: line one\ndata: line two\n\nevent: no-data\n\n'];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const p of parts) controller.enqueue(new TextEncoder().encode(p));
        controller.close();
      },
    });
    const out = [];
    for await (const m of readSse(body)) out.push(m);
    expect(out).toEqual([
      { id: '1.2', event: 'stream:delta', data: '{"a":1}', retry: undefined },
      { id: undefined, event: 'ready', data: '{}', retry: 500 },
      { id: undefined, event: 'message', data: 'line one\nline two', retry: undefined },
    ]);
  });
});
