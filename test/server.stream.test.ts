// GET /api/tasks/:id/stream: a task's model tokens as Server-Sent Events, each message's id the pair
// of cursors `<log seq>.<frame seq>`, so a client that reconnects with Last-Event-ID continues
// exactly after the last frame it saw; log entries only when asked; frames replayable after the
// step ended; the same token rules as every route. Against the local OpenAI-compatible server (the
// real openai client and its SSE).
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { chatCompletion } from '../src/ai/index.ts';
import { createServer } from '../src/server/index.ts';
import { gate, makeEngine, startWorker } from './support/engine.ts';
import { TOKENS, call } from './support/server.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { readStream, type SseMessage } from './support/sse.ts';

let fake: FakeOpenAI;
let client: OpenAI;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL, maxRetries: 0 });
});
afterEach(async () => {
  await fake.close();
});

const frames = (seen: SseMessage[]) => seen.filter((m) => m.event === 'stream:delta' || m.event === 'stream:reset');
const textOf = (seen: SseMessage[]) =>
  frames(seen)
    .map((m) => (JSON.parse(m.data as string) as { delta: string }).delta)
    .join('');

function setup(resume: Promise<void>, extra: { streamFrames?: { keep: 'task' | 'step' } } = {}) {
  fake.script([
    { kind: 'text', chunks: ['Durable ', 'agents ', 'survive ', 'crashes.'], stallAfter: 2, resume },
    { kind: 'text', chunks: ['Second ', 'answer.'] },
  ]);
  const wf = workflow('stream-route', async (ctx) => {
    const a = await chatCompletion(ctx, 'first', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
    const b = await chatCompletion(ctx, 'second', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'again' }], stream: true });
    return `${a.choices[0]?.message.content} / ${b.choices[0]?.message.content}`;
  });
  const engine = makeEngine({ workflows: [wf], ...extra });
  const server = createServer(engine, { tokens: TOKENS });
  return { engine, server, wf };
}

describe('HTTP API: token streams', () => {
  it('streams tokens as they come, each message with a <log>.<frame> id, and a client that reconnects with Last-Event-ID continues exactly after it', async () => {
    const release = gate();
    const { engine, server, wf } = setup(release.promise);
    await startWorker(engine);
    const { id } = await engine.start(wf);
    // Two tokens out, the model stalls: the client sees them while the step runs.
    const first = await readStream(server, `/api/tasks/${id}/stream`, (s) => textOf(s) === 'Durable agents ');
    expect(first[0]?.event).toBe('ready');
    expect(frames(first).every((m) => /^\d+\.\d+$/.test(m.id ?? ''))).toBe(true);
    // Without ?log=true no log entry is sent.
    expect(first.filter((m) => m.id !== undefined).every((m) => m.event?.startsWith('stream:'))).toBe(true);
    const lastId = frames(first).at(-1)?.id as string;

    release.open();
    const rest = await readStream(server, `/api/tasks/${id}/stream`, () => false, { 'last-event-id': lastId });
    expect(rest.at(-1)?.event).toBe('end');
    // Exactly the frames after the last one seen: nothing repeated, nothing missing.
    expect(textOf(rest)).toBe('survive crashes.Second answer.');
    const ids = frames(rest).map((m) => Number((m.id as string).split('.')[1]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(ids[0]).toBeGreaterThan(Number(lastId.split('.')[1]));
    expect(await engine.result(id)).toBe('Durable agents survive crashes. / Second answer.');
  });

  it('replays the frames of a step that already ended, and of the whole task until frames expire; ?log=true adds the log entries in order', async () => {
    const release = gate();
    release.open();
    const { engine, server, wf } = setup(release.promise);
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await engine.result(id);
    // A page reloaded after the steps ended still gets every token.
    const again = await readStream(server, `/api/tasks/${id}/stream`, () => false);
    expect(textOf(again)).toBe('Durable agents survive crashes.Second answer.');
    expect(again.at(-1)?.event).toBe('end');
    const withLog = await readStream(server, `/api/tasks/${id}/stream?log=true`, () => false);
    const logged = withLog.filter((m) => m.id !== undefined && !m.event?.startsWith('stream:'));
    expect(logged.map((m) => m.event)).toContain('step:completed');
    expect(logged.at(-1)?.event).toBe('transition');
    // Both cursors grow along the stream.
    const pairs = withLog.filter((m) => m.id !== undefined).map((m) => (m.id as string).split('.').map(Number) as [number, number]);
    for (let i = 1; i < pairs.length; i++) {
      expect((pairs[i] as [number, number])[0]).toBeGreaterThanOrEqual((pairs[i - 1] as [number, number])[0]);
      expect((pairs[i] as [number, number])[1]).toBeGreaterThanOrEqual((pairs[i - 1] as [number, number])[1]);
    }
    // ?after= works like Last-Event-ID (for clients that cannot set headers).
    const firstFrame = frames(withLog)[0]?.id as string;
    const afterQuery = await readStream(server, `/api/tasks/${id}/stream?after=${firstFrame}`, () => false);
    expect(textOf(afterQuery)).toBe('agents survive crashes.Second answer.');
  });

  it("with streamFrames: { keep: 'step' } a finished stream's frames are gone; its text is in the step's log entry", async () => {
    const release = gate();
    release.open();
    const { engine, server, wf } = setup(release.promise, { streamFrames: { keep: 'step' } });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await engine.result(id);
    const again = await readStream(server, `/api/tasks/${id}/stream?log=true`, () => false);
    expect(frames(again)).toEqual([]);
    const completed = again.filter((m) => m.event === 'step:completed').map((m) => m.data as string);
    expect(completed.join('')).toContain('Durable agents survive crashes.');
  });

  it('refuses a bad cursor, an unknown task, an unknown query option and a caller without a token', async () => {
    const release = gate();
    release.open();
    const { engine, server, wf } = setup(release.promise);
    const { id } = await engine.start(wf);
    const bad = await call(server, 'GET', `/api/tasks/${id}/stream`, { as: 'vera', headers: { 'last-event-id': '12' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_ARGUMENT');
    expect(bad.body.error.message).toContain('Last-Event-ID');
    expect((await call(server, 'GET', `/api/tasks/${id}/stream?after=x.1`, { as: 'vera' })).status).toBe(400);
    expect((await call(server, 'GET', `/api/tasks/${id}/stream?logs=true`, { as: 'vera' })).status).toBe(400);
    expect((await call(server, 'GET', '/api/tasks/0000000000000000000000000z/stream', { as: 'vera' })).status).toBe(404);
    expect((await call(server, 'GET', `/api/tasks/${id}/stream`, { as: null })).status).toBe(401);
    const doc = (await call(server, 'GET', '/api/openapi.json', { as: 'vera' })).body;
    expect(doc.paths['/api/tasks/{id}/stream'].get['x-permission']).toBe('read');
  });
});
