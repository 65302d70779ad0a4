// Rate limits: named limits in requests and tokens shared by every worker through the store. A
// step draws before each attempt; a full window parks the task until capacity returns (the draw
// is placed then, so no interval of the limit's length ever holds more than the limit).
import { describe, expect, it } from 'vitest';
import { Engine, isStepwiseError, workflow, type RateLimits, type Workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { busiestWindow } from './support/rate-calls.ts';

const T0 = Date.UTC(2030, 0, 1);
const SECOND = 1000;
/** Draws are placed in a window 5% longer than the limit's, the most a call may start late. */
const placed = (perMs: number): number => perMs * 1.05;

interface Call {
  task: string;
  drawnAt: number;
  calledAt: number;
  key: string;
}

function limited(calls: Call[], clock: ManualClock, name = 'call-api') {
  return workflow(name, async (ctx, input: { key?: string; tokens?: number; used?: number }) => {
    return ctx.step(
      'call',
      async ({ rateLimit }) => {
        calls.push({ task: ctx.taskId, drawnAt: rateLimit?.drawnAt ?? -1, calledAt: clock.now(), key: rateLimit?.key ?? '?' });
        if (input.used !== undefined) await rateLimit?.settle(input.used);
        return rateLimit?.drawnAt ?? null;
      },
      { rateLimit: { name: 'api', ...(input.key !== undefined ? { key: input.key } : {}), ...(input.tokens !== undefined ? { tokens: input.tokens } : {}) } },
    );
  });
}

async function statuses(engine: Engine): Promise<string[]> {
  const { tasks } = await engine.list({ limit: 1000 });
  return tasks.map((t) => t.status);
}

async function errorOf(engine: Engine, id: string): Promise<{ code?: string; message: string }> {
  const t = await engine.get(id);
  if (t.status !== 'failed') throw new Error(`task ${id} is ${t.status}`);
  return t.error;
}

describe('rate limits', () => {
  it('two engines with two workers each never put more than the limit in a window, and fill every window', async () => {
    const clock = new ManualClock(T0);
    const calls: Call[] = [];
    const rateLimits: RateLimits = { api: { requests: 5, per: '10s' } };
    const url = tempDbUrl();
    const engines = [0, 1].map(() => new Engine({ store: url, workflows: [limited(calls, clock)], clock, rateLimits }));
    try {
      const [a, b] = engines as [Engine, Engine];
      await a.startMany(Array.from({ length: 20 }, (_, i) => ({ workflow: 'call-api', input: {}, idempotencyKey: `k${i}` })));
      for (const e of engines) for (let i = 0; i < 2; i++) await startWorker(e as never, { concurrency: 4 });
      // Every task drew: five went at once, the others hold draws placed when capacity returns.
      await eventually(async () => (await statuses(a)).filter((s) => s === 'succeeded' || s === 'waiting').length === 20, 20_000, 'every task drew');
      expect(calls).toHaveLength(5);
      for (let w = 1; w <= 3; w++) {
        await clock.advance(placed(10 * SECOND));
        await eventually(() => calls.length === 5 * (w + 1), 20_000, `window ${w}`);
        // The window's runs have ended before the clock moves again: a run still going when the
        // clock jumps past its lease would give the lease up (and its step could run again).
        await eventually(
          async () => {
            const now = await statuses(a);
            return now.filter((x) => x === 'succeeded').length === 5 * (w + 1) && now.every((x) => x === 'succeeded' || x === 'waiting');
          },
          20_000,
          `window ${w}'s tasks ended`,
        );
      }
      await eventually(async () => (await statuses(b)).every((s) => s === 'succeeded'), 20_000, 'all succeeded');
      // Each window holds exactly the limit: no interval of 10 s holds more, and none was left unused.
      const drawn = calls.map((c) => c.drawnAt).sort((x, y) => x - y);
      expect(drawn).toEqual([0, 1, 2, 3].flatMap((w) => Array<number>(5).fill(T0 + w * placed(10 * SECOND))));
      expect(busiestWindow(drawn, 10 * SECOND)).toBe(5);
      expect(
        busiestWindow(
          calls.map((c) => c.calledAt),
          10 * SECOND,
        ),
      ).toBe(5);
      for (const c of calls) expect(c.calledAt).toBeGreaterThanOrEqual(c.drawnAt);
      expect(new Set(calls.map((c) => c.task)).size).toBe(20);
    } finally {
      await Promise.all(engines.map((e) => e.close()));
    }
  });

  it('parks a step whose window is full without holding a worker slot, and explain names the limit, key and time', async () => {
    const clock = new ManualClock(T0);
    const calls: Call[] = [];
    const free = workflow('free', async (ctx) => ctx.step('go', () => 'done'));
    const engine = makeEngine({ workflows: [limited(calls, clock), free], clock, rateLimits: { api: { requests: 1, per: '1m' } } });
    await startWorker(engine, { concurrency: 1 });
    const first = await engine.start('call-api', { key: 'acme' });
    await waitForStatus(engine, first.id, 'succeeded');
    const second = await engine.start('call-api', { key: 'acme' });
    await waitForStatus(engine, second.id, 'waiting');
    // Its slot is free: another task runs meanwhile on the worker's only slot.
    const other = await engine.start('free', {});
    await waitForStatus(engine, other.id, 'succeeded');
    const why = await engine.explain(second.id);
    expect(why.wait).toMatchObject({ kind: 'rate-limit', limit: 'api', key: 'acme', step: 'call', until: T0 + placed(60 * SECOND) });
    expect(why.summary).toContain('rate limit "api" for key "acme"');
    expect(why.summary).toContain(new Date(T0 + placed(60 * SECOND)).toISOString());
    // Another key has a window of its own.
    const beta = await engine.start('call-api', { key: 'beta' });
    await waitForStatus(engine, beta.id, 'succeeded');
    await clock.advance(placed(60 * SECOND));
    await waitForStatus(engine, second.id, 'succeeded');
    expect(calls.map((c) => [c.key, c.drawnAt])).toEqual([
      ['acme', T0],
      ['beta', T0],
      ['acme', T0 + placed(60 * SECOND)],
    ]);
  });

  it('a parked draw survives its worker: the task resumed by another engine calls at its reserved time without drawing again', async () => {
    const clock = new ManualClock(T0);
    const calls: Call[] = [];
    const url = tempDbUrl();
    const rateLimits: RateLimits = { api: { requests: 1, per: '10s' } };
    const first = new Engine({ store: url, workflows: [limited(calls, clock)], clock, rateLimits });
    await first.startMany([0, 1, 2].map((i) => ({ workflow: 'call-api', input: {}, idempotencyKey: `k${i}` })));
    await startWorker(first as never);
    await eventually(async () => (await statuses(first)).filter((s) => s === 'waiting').length === 2, 20_000, 'two parked');
    await first.close();
    const second = new Engine({ store: url, workflows: [limited(calls, clock)], clock, rateLimits });
    try {
      await startWorker(second as never);
      await clock.advance(placed(10 * SECOND));
      await eventually(() => calls.length === 2, 20_000, 'the second call');
      await clock.advance(placed(10 * SECOND));
      await eventually(() => calls.length === 3, 20_000, 'the third call');
      // A draw made again would have gone after the third window: each kept its place.
      expect(calls.map((c) => c.drawnAt)).toEqual([T0, T0 + placed(10 * SECOND), T0 + 2 * placed(10 * SECOND)]);
    } finally {
      await second.close();
    }
  });

  it('a task woken later than its place allows draws again, so its call cannot crowd a later window', async () => {
    const clock = new ManualClock(T0);
    const calls: Call[] = [];
    const url = tempDbUrl();
    const rateLimits: RateLimits = { api: { requests: 1, per: '10s' } };
    const first = new Engine({ store: url, workflows: [limited(calls, clock)], clock, rateLimits });
    await first.startMany([0, 1].map((i) => ({ workflow: 'call-api', input: {}, idempotencyKey: `k${i}` })));
    await startWorker(first as never);
    await eventually(async () => (await statuses(first)).filter((s) => s === 'waiting').length === 1, 20_000, 'one parked');
    await first.close();
    // No worker ran when its place came: it is resumed 30 s later, past its place and the 5% margin.
    await clock.advance('30s');
    const second = new Engine({ store: url, workflows: [limited(calls, clock)], clock, rateLimits });
    try {
      await startWorker(second as never);
      await eventually(() => calls.length === 2, 20_000, 'the late call');
      expect(calls.map((c) => c.drawnAt)).toEqual([T0, T0 + 30 * SECOND]);
    } finally {
      await second.close();
    }
  });

  it('counts tokens: a settled draw counts its real usage, so the next call goes at once', async () => {
    const clock = new ManualClock(T0);
    const calls: Call[] = [];
    const engine = makeEngine({ workflows: [limited(calls, clock)], clock, rateLimits: { api: { tokens: 1000, per: '1m' } } });
    await startWorker(engine);
    const a = await engine.start('call-api', { tokens: 600, used: 100 });
    await waitForStatus(engine, a.id, 'succeeded');
    const b = await engine.start('call-api', { tokens: 600 });
    await waitForStatus(engine, b.id, 'succeeded');
    // Unsettled, this one's 600 tokens fill the window: the next waits for them to leave it.
    const c = await engine.start('call-api', { tokens: 600 });
    await waitForStatus(engine, c.id, 'waiting');
    expect((await engine.explain(c.id)).wait).toMatchObject({ kind: 'rate-limit', limit: 'api', until: T0 + placed(60 * SECOND) });
    await clock.advance(placed(60 * SECOND));
    await waitForStatus(engine, c.id, 'succeeded');
    expect(calls.map((x) => x.drawnAt)).toEqual([T0, T0, T0 + placed(60 * SECOND)]);
  });

  it('fails a task whose step names a limit the engine does not have, naming the known ones', async () => {
    const typo: Workflow = workflow('typo', async (ctx) => ctx.step('call', () => 1, { rateLimit: 'opnai' }));
    const engine = makeEngine({ workflows: [typo], rateLimits: { openai: { requests: 10, per: '1m' } } });
    await startWorker(engine);
    const { id } = await engine.start('typo', {});
    await waitForStatus(engine, id, 'failed');
    const error = await errorOf(engine, id);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(error.message).toContain('rateLimit "opnai" is not a limit of this engine (known: openai)');
  });

  it('fails a step that draws more than its limit allows in a window', async () => {
    const big: Workflow = workflow('big', async (ctx) => ctx.step('call', () => 1, { rateLimit: { name: 'openai', tokens: 5000 } }));
    const engine = makeEngine({ workflows: [big], rateLimits: { openai: { tokens: 1000, per: '1m' } } });
    await startWorker(engine);
    const { id } = await engine.start('big', {});
    await waitForStatus(engine, id, 'failed');
    expect((await errorOf(engine, id)).message).toContain('draws 5000 tokens, more than limit "openai" allows in a window (1000)');
  });

  it('refuses bad limits when the engine is made, naming the option', () => {
    const bad = (rateLimits: unknown): string => {
      try {
        new Engine({ store: 'sqlite::memory:', rateLimits: rateLimits as RateLimits });
      } catch (e) {
        expect(isStepwiseError(e) && e.code).toBe('INVALID_ARGUMENT');
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(bad({ openai: { requests: 10, per: 'soon' } })).toContain('rateLimits.openai.per "soon" is not a duration');
    expect(bad({ openai: { requests: 10, per: 0 } })).toContain('rateLimits.openai.per must be at least 1 ms');
    expect(bad({ openai: { requests: 10 } })).toContain('rateLimits.openai.per is required');
    expect(bad({ openai: { requests: 0, per: '1m' } })).toContain('rateLimits.openai.requests must be a positive integer, got 0');
    expect(bad({ openai: { tokens: -5, per: '1m' } })).toContain('rateLimits.openai.tokens must be a positive integer, got -5');
    expect(bad({ openai: { per: '1m' } })).toContain('rateLimits.openai counts nothing');
    expect(bad({ openai: { requests: 1, per: '1m', burst: 2 } })).toContain('unknown option "burst"');
  });
});
