// engine.events({ taskId, streams: true }): the live frames of a task's streaming model steps in the
// same stream as its log entries, resumable on both sequences, with the reset frame of a retried
// attempt; a finished stream's frames stay until the task ended (or only while it streams).
// Against the local OpenAI-compatible server (the real openai client and SSE).
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, workflow, type Engine, type StepEvent, type StreamEvent, type TaskEvent } from '../src/index.ts';
import { chatCompletion } from '../src/ai/index.ts';
import { TEST_STORE, eventually, gate, makeEngine, startWorker } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
let client: OpenAI;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL });
});
afterEach(async () => {
  await fake.close();
});

const isFrame = (e: TaskEvent | StreamEvent): e is StreamEvent => e.type === 'stream:delta' || e.type === 'stream:reset';
const text = (frames: StreamEvent[]): string => frames.map((f) => f.delta).join('');

function streamer(name: string, step: Parameters<typeof chatCompletion>[4] = {}) {
  return workflow(name, async (ctx) => {
    const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true }, step);
    return r.choices[0]?.message.content;
  });
}

/** Reads `engine.events` with streams until `stop` says so. */
async function readUntil(engine: Engine, taskId: string, stop: (seen: Array<TaskEvent | StreamEvent>) => boolean): Promise<Array<TaskEvent | StreamEvent>> {
  const seen: Array<TaskEvent | StreamEvent> = [];
  for await (const e of engine.events({ taskId, streams: true, pollMs: 10 })) {
    seen.push(e);
    if (stop(seen)) break;
  }
  return seen;
}

describe('engine.events with stream frames', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('carries a running stream as { step, attempt, seq, delta } frames beside the log entries, resumable after both sequences', async () => {
    fake.script([{ kind: 'text', chunks: ['one ', 'two ', 'three'], stallAfter: 2 }]);
    const wf = streamer('live-events');
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await fake.waitForRequest(1, 2);
    const seen = await readUntil(engine, id, (s) => text(s.filter(isFrame)) === 'one two ');
    const frames = seen.filter(isFrame);
    const entries = seen.filter((e): e is TaskEvent => !isFrame(e));
    expect(frames.every((f) => f.type === 'stream:delta' && f.step === 'write' && f.attempt === 1 && f.taskId === id)).toBe(true);
    expect(frames.map((f) => f.seq)).toEqual([...frames.map((f) => f.seq)].sort((a, b) => a - b));
    // The log entries come in the same stream: the task's creation and start precede the frames.
    expect(entries.some((e) => e.type === 'transition' && e.to === 'running')).toBe(true);
    expect(seen.findIndex(isFrame)).toBeGreaterThan(seen.findIndex((e) => e.type === 'transition' && e.to === 'running'));
    // Resuming after the last entry and the last frame seen yields nothing already seen.
    const lastSeq = entries[entries.length - 1]?.seq ?? 0;
    const lastFrame = frames[frames.length - 1]?.seq ?? 0;
    const again: Array<TaskEvent | StreamEvent> = [];
    for await (const e of engine.events({ taskId: id, streams: true, after: lastSeq, streamAfter: lastFrame, follow: false })) again.push(e);
    expect(again.filter(isFrame)).toEqual([]);
    expect(again.every((e) => !isFrame(e) && e.seq > lastSeq)).toBe(true);
    // From the start: the same frames again, in the same order.
    const replay: StreamEvent[] = [];
    for await (const e of engine.events({ taskId: id, streams: true, follow: false })) if (isFrame(e)) replay.push(e);
    expect(replay.map((f) => f.seq)).toEqual(frames.map((f) => f.seq));
    // Without `streams`, the same reader sees no frames.
    const plain: TaskEvent[] = [];
    for await (const e of engine.events({ taskId: id, follow: false })) plain.push(e);
    expect(plain.some((e) => (e.type as string).startsWith('stream:'))).toBe(false);
    await engine.cancel(id);
    await engine.result(id).catch(() => undefined);
  });

  it("a reader in the worker's process hears of new frames at once, not at its next poll", async () => {
    const release = gate();
    fake.script([{ kind: 'text', chunks: ['one ', 'two '], stallAfter: 0, resume: release.promise, hangAtEnd: true }]);
    const wf = streamer('announced-frames');
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await fake.waitForRequest(1, 0);
    // A poll of ten minutes: once the reader waits, only the bus can bring the frames within the
    // test's timeout. The model sends its tokens after the reader's first read found none, and
    // then neither ends nor sends more (no log entry wakes the reader).
    const reader = engine.events({ taskId: id, streams: true, pollMs: 600_000 })[Symbol.asyncIterator]();
    let seen = '';
    let next = reader.next();
    await new Promise((r) => setTimeout(r, 100));
    release.open();
    for (;;) {
      const { value, done } = await next;
      if (done) break;
      if (isFrame(value)) seen += value.delta;
      if (seen === 'one two ') break;
      next = reader.next();
    }
    await reader.return?.();
    expect(seen).toBe('one two ');
    await engine.cancel(id);
    await engine.result(id).catch(() => undefined);
  });

  it('a retried attempt starts with a reset frame in the events stream', async () => {
    fake.script([
      { kind: 'text', chunks: ['old ', 'text'], stallAfter: 1 },
      { kind: 'text', chunks: ['new ', 'text'], stallAfter: 1 },
    ]);
    const wf = streamer('retried-events', { step: { timeout: '1s', retry: { maxAttempts: 10, initialDelay: 1, jitter: false } } });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const seen = await readUntil(engine, id, (s) => {
      const f = s.filter(isFrame);
      const last = f[f.length - 1];
      const prev = f[f.length - 2];
      return last?.type === 'stream:delta' && last.attempt >= 2 && prev?.type === 'stream:reset' && prev.attempt === last.attempt;
    });
    const frames = seen.filter(isFrame);
    const reset = frames.findIndex((f) => f.type === 'stream:reset');
    expect(frames.slice(0, reset).every((f) => f.attempt === 1 && f.type === 'stream:delta')).toBe(true);
    expect(frames[reset]).toMatchObject({ type: 'stream:reset', step: 'write', attempt: 2, delta: '' });
    expect(frames[frames.length - 1]).toMatchObject({ type: 'stream:delta', delta: 'new ' });
    await engine.cancel(id);
    await engine.result(id).catch(() => undefined);
  });

  it("keeps a finished stream's frames until its task has ended; a worker deletes them streamFrames.afterEnd later", async () => {
    fake.script([{ kind: 'text', chunks: ['one ', 'two ', 'three'], usage: { prompt_tokens: 3, completion_tokens: 3 } }]);
    const wf = streamer('finished-events');
    const engine = makeEngine({ workflows: [wf], streamFrames: { afterEnd: '200ms' } });
    await startWorker(engine, { retentionSweepMs: 50 });
    const { id } = await engine.start(wf);
    const all: Array<TaskEvent | StreamEvent> = [];
    // A following reader ends when the task succeeded.
    for await (const e of engine.events({ taskId: id, streams: true, pollMs: 10 })) all.push(e);
    expect(await engine.result(id)).toBe('one two three');
    expect(all[all.length - 1]).toMatchObject({ type: 'transition', to: 'succeeded' });
    const read = async () => {
      const out: Array<TaskEvent | StreamEvent> = [];
      for await (const e of engine.events({ taskId: id, streams: true, follow: false })) out.push(e);
      return out;
    };
    // A reader that comes after the step (or the task) ended still replays the tokens…
    expect(text((await read()).filter(isFrame))).toBe('one two three');
    // …until the worker's sweep deletes them; the text stays the step's result.
    await eventually(async () => (await read()).filter(isFrame).length === 0, 10_000, 'the frames of the ended task deleted');
    const done = (await read()).find((e): e is StepEvent => e.type === 'step:completed' && (e as StepEvent).step.name === 'write');
    expect(JSON.stringify(done?.step.output)).toContain('one two three');
  });

  it("with streamFrames: { keep: 'step' } a finished stream leaves only its final text", async () => {
    fake.script([{ kind: 'text', chunks: ['one ', 'two ', 'three'] }]);
    const wf = streamer('step-kept-events');
    const engine = makeEngine({ workflows: [wf], streamFrames: { keep: 'step' } });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id)).toBe('one two three');
    const after: Array<TaskEvent | StreamEvent> = [];
    for await (const e of engine.events({ taskId: id, streams: true, follow: false })) after.push(e);
    expect(after.filter(isFrame)).toEqual([]);
  });

  it('refuses streamFrames options it does not know', () => {
    expect(() => makeEngine({ streamFrames: { keep: 'forever' as 'task' } })).toThrow(/keep is 'task' or 'step'/);
    expect(() => makeEngine({ streamFrames: { afterEnd: 'soon' } })).toThrow(InvalidArgumentError);
    expect(() => makeEngine({ streamFrames: { keepFor: '1m' } as never })).toThrow(/unknown option "keepFor"/);
  });

  it('refuses stream options it cannot honour', () => {
    const engine = makeEngine();
    expect(() => engine.events({ streams: true })).toThrow(InvalidArgumentError);
    expect(() => engine.events({ streams: true })).toThrow(/needs a taskId/);
    expect(() => engine.events({ taskId: 't', streamAfter: 3 })).toThrow(/goes with streams: true/);
    expect(() => engine.events({ taskId: 't', streams: true, streamAfter: -1 })).toThrow(/whole number/);
  });
});
