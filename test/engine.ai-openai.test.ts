// The official openai client as durable steps (`stepwise-engine/ai` chatCompletion), against a
// local OpenAI-compatible server: the real client code path, HTTP and SSE included.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError, TaskCancelledError, TaskFailedError, workflow, type UsageEvent, type WorkerEvents } from '../src/index.ts';
import { chatCompletion, streamEvents, type StreamEvent } from '../src/ai/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';
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

const usageOf = (history: Array<{ type: string }>): UsageEvent['usage'][] => history.filter((e): e is UsageEvent => e.type === 'usage:attempt').map((e) => e.usage);

describe('chatCompletion (openai client)', () => {
  it('checkpoints the completion: the idempotency key travels as a header, usage and cost are recorded, a replay never calls again', async () => {
    fake.script([{ kind: 'text', chunks: ['Paris.'], usage: { prompt_tokens: 1000, completion_tokens: 200, cached_tokens: 400 } }]);
    let runs = 0;
    const wf = workflow('ask', async (ctx) => {
      const reply = await chatCompletion(ctx, 'ask', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Capital of France?' }] });
      // Code after the call runs again on replay; the call does not.
      runs++;
      await ctx.step('after', () => 1);
      return reply.choices[0]?.message.content;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('ask');
    expect(await engine.result(id)).toBe('Paris.');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.headers['idempotency-key']).toBe(`v1:${id}:ask#1`);
    const info = await engine.get(id);
    const [u] = usageOf(info.history);
    // 600 uncached input at $0.15/M, 400 cached at $0.075/M, 200 output at $0.6/M.
    const cost = (600 * 0.15 + 400 * 0.075 + 200 * 0.6) / 1e6;
    expect(u).toMatchObject({
      step: 'ask',
      attempt: 1,
      model: 'gpt-4o-mini',
      outcome: 'succeeded',
      inputTokens: 1000,
      outputTokens: 200,
      cachedInputTokens: 400,
      priced: true,
      estimated: false,
    });
    expect(u?.costUsd).toBeCloseTo(cost, 12);
    expect(info.usage?.total).toMatchObject({ inputTokens: 1000, outputTokens: 200, totalTokens: 1200, attempts: 1 });
    expect(info.usage?.steps.ask?.costUsd).toBeCloseTo(cost, 12);
    expect(runs).toBe(1);
  });

  it('turns the client retries off: a 500 reaches the server once per engine attempt, and each failed attempt is recorded', async () => {
    fake.script([
      { kind: 'error', status: 500 },
      { kind: 'error', status: 500 },
    ]);
    const wf = workflow('flaky', async (ctx) =>
      chatCompletion(ctx, 'call', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { step: { retry: { maxAttempts: 2, initialDelay: 1, jitter: false } } }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('flaky');
    const err = await engine.result(id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskFailedError);
    // Two engine attempts, one request each: the openai client's own retries (2 by default) are off.
    expect(fake.requests).toHaveLength(2);
    const usage = usageOf((await engine.get(id)).history);
    expect(usage.map((u) => `${u.attempt}:${u.outcome}`)).toEqual(['1:failed', '2:failed']);
    expect(usage[0]?.error).toMatch(/500/);
  });

  it('retries a 429 once, after the delay its Retry-After header asks for', async () => {
    fake.script([
      { kind: 'error', status: 429, retryAfter: 1 },
      { kind: 'text', chunks: ['ok'], usage: { prompt_tokens: 5, completion_tokens: 1 } },
    ]);
    const wf = workflow('limited', async (ctx) => {
      const r = await chatCompletion(ctx, 'call', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
      return r.choices[0]?.message.content;
    });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const retries: Array<WorkerEvents['step:retrying']> = [];
    worker.on('step:retrying', (e) => void retries.push(e));
    const { id } = await engine.start('limited');
    expect(await engine.result(id)).toBe('ok');
    expect(fake.requests).toHaveLength(2);
    expect(retries).toHaveLength(1);
    expect(retries[0]?.delayMs).toBe(1000);
    expect(retries[0]?.error.message).toMatch(/429/);
    expect(usageOf((await engine.get(id)).history).map((u) => u.outcome)).toEqual(['failed', 'succeeded']);
  });

  it('a cancel mid-stream closes the HTTP connection, and the cancelled attempt is billed with its streamed output', async () => {
    fake.script([{ kind: 'text', chunks: ['The ', 'answer ', 'is ', 'long'], stallAfter: 2 }]);
    const wf = workflow('streamer', async (ctx) => {
      const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
      return r.choices[0]?.message.content;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('streamer');
    const req = await fake.waitForRequest(1, 2);
    // Cancel once the client has received both chunks (the step published them).
    let seen = '';
    for await (const f of streamEvents(engine, id, { pollMs: 10 })) if ((seen += f.delta) === 'The answer ') break;
    await engine.cancel(id, { reason: 'enough' });
    await req.ended;
    expect(req.closedByClient).toBe(true);
    expect(await engine.result(id).catch((e: unknown) => e)).toBeInstanceOf(TaskCancelledError);
    const [u] = usageOf((await engine.get(id)).history);
    expect(u).toMatchObject({ step: 'write', attempt: 1, outcome: 'cancelled', estimated: true, outputTokens: Math.ceil('The answer '.length / 4) });
  });

  it('publishes a stream live as { step, attempt, seq, delta } frames, replayable after it finished, its text the step output', async () => {
    fake.script([{ kind: 'text', chunks: ['one ', 'two ', 'three'], stallAfter: 2 }]);
    const wf = workflow('live', async (ctx) => {
      const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
      return r.choices[0]?.message.content;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('live');
    await fake.waitForRequest(1, 2);
    // A reader sees what streamed so far, while the step is still running.
    const live: StreamEvent[] = [];
    for await (const f of streamEvents(engine, id, { pollMs: 10 })) {
      live.push(f);
      if (live.map((x) => x.delta).join('') === 'one two ') break;
    }
    expect(live.every((f) => f.step === 'write' && f.attempt === 1 && f.type === 'stream:delta')).toBe(true);
    // Resuming after the last frame seen yields nothing new yet.
    const last = live[live.length - 1]?.seq ?? 0;
    const again: StreamEvent[] = [];
    for await (const f of streamEvents(engine, id, { after: last, follow: false })) again.push(f);
    expect(again).toEqual([]);
    // The stalled stream is abandoned by cancelling; a second task streams to the end.
    await engine.cancel(id);
    await engine.result(id).catch(() => undefined);
    fake.script([{ kind: 'text', chunks: ['one ', 'two ', 'three'], usage: { prompt_tokens: 3, completion_tokens: 3 } }]);
    const second = await engine.start('live');
    expect(await engine.result(second.id)).toBe('one two three');
    const left: StreamEvent[] = [];
    for await (const f of streamEvents(engine, second.id, { follow: false })) left.push(f);
    // Kept until the task's frames expire (streamFrames.afterEnd): a late reader replays them.
    expect(left.map((f) => f.delta).join('')).toBe('one two three');
    const step = (await engine.get(second.id)).steps.find((s) => s.name === 'write');
    expect((step?.output as { value: { choices: Array<{ message: { content: string } }> } }).value.choices[0]?.message.content).toBe('one two three');
  });

  it('starts a retried attempt with a reset frame: readers drop what the failed attempt streamed', async () => {
    fake.script([
      { kind: 'text', chunks: ['old ', 'text'], stallAfter: 1 },
      { kind: 'text', chunks: ['new ', 'text'], stallAfter: 1 },
    ]);
    const wf = workflow('retried-stream', async (ctx) =>
      chatCompletion(
        ctx,
        'write',
        client,
        { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true },
        {
          // Each stalled attempt times out and is retried.
          step: { timeout: '1s', retry: { maxAttempts: 10, initialDelay: 1, jitter: false } },
        },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('retried-stream');
    const frames: StreamEvent[] = [];
    for await (const f of streamEvents(engine, id, { pollMs: 10 })) {
      frames.push(f);
      const prev = frames[frames.length - 2];
      if (f.type === 'stream:delta' && f.attempt >= 2 && prev?.type === 'stream:reset' && prev.attempt === f.attempt) break;
    }
    const firstReset = frames.findIndex((f) => f.type === 'stream:reset');
    expect(firstReset).toBeGreaterThanOrEqual(0);
    expect(frames.slice(0, firstReset).every((f) => f.attempt === 1 && f.type === 'stream:delta')).toBe(true);
    expect(frames[firstReset]).toMatchObject({ type: 'stream:reset', attempt: 2, delta: '' });
    expect(frames[frames.length - 1]).toMatchObject({ type: 'stream:delta', delta: 'new ' });
    // Frames are ordered by seq.
    expect(frames.map((f) => f.seq)).toEqual([...frames.map((f) => f.seq)].sort((a, b) => a - b));
    await engine.cancel(id);
    await engine.result(id).catch(() => undefined);
    // Every attempt was billed: the timed-out ones as failed.
    const usage = usageOf((await engine.get(id)).history);
    expect(usage.slice(0, -1).every((u) => u.outcome === 'failed')).toBe(true);
    expect(usage[usage.length - 1]?.outcome).toBe('cancelled');
  });

  it('refuses the call that would exceed the budget: the task fails with BUDGET_EXCEEDED and the provider is not called', async () => {
    fake.script([{ kind: 'text', chunks: ['a'], usage: { prompt_tokens: 60, completion_tokens: 40 } }]);
    const wf = workflow(
      'thrifty',
      async (ctx) => {
        await chatCompletion(ctx, 'first', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] });
        await chatCompletion(ctx, 'second', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'y' }] });
        return 'done';
      },
      { budget: { tokens: 100 } },
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('thrifty');
    const err = await engine.result(id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskFailedError);
    expect((err as TaskFailedError).cause).toMatchObject({ code: 'BUDGET_EXCEEDED', name: 'BudgetExceededError' });
    expect(fake.requests).toHaveLength(1);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('BUDGET_EXCEEDED');
    expect(info.usage?.total.totalTokens).toBe(100);

    // A per-start budget overrides the workflow's.
    const roomy = await engine.start('thrifty', undefined, { budget: { tokens: 1000 } });
    expect(await engine.result(roomy.id)).toBe('done');
    expect((await engine.get(roomy.id)).usage?.budget).toEqual({ tokens: 1000 });
    // A malformed budget is refused at start, and no task is created.
    const before = (await engine.list()).tasks.length;
    await expect(engine.start('thrifty', undefined, { budget: { tokens: -5 } })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect((await engine.list()).tasks.length).toBe(before);
  });
});
