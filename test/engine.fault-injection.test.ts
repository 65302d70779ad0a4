// Fault injection for workflow authors (stepwise-engine/testing faultPlan): each fault goes through
// the engine's real path — a step error through its retry policy, a hang through its timeout, a
// model 429 through the AI helpers' classification and Retry-After, a lost store through the
// worker's retries — and a fault that never fires is reported, never silently ignored.
import { describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { MockLanguageModelV3 } from 'ai/test';
import { Engine, RetryableError, workflow } from '../src/index.ts';
import { generateText } from '../src/ai/index.ts';
import { openStore } from '../src/store-url.ts';
import { ManualClock, checkResume, faultPlan } from '../src/testing/index.ts';
import { contentPipeline } from '../examples/content-pipeline/workflow.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, tempDir, tempDbUrl } from './support/engine.ts';

const KILL_FIXTURE = new URL('./fixtures/kill-at-step.ts', import.meta.url).pathname;

const flaky = workflow('flaky', async (ctx) => ctx.step('charge', () => 'charged', { retry: { maxAttempts: 3, initialDelay: '10ms' } }));

function okModel(): { model: MockLanguageModelV3; calls: () => number } {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      calls++;
      return {
        content: [{ type: 'text' as const, text: 'bonjour' }],
        finishReason: { unified: 'stop' as const, raw: undefined },
        usage: { inputTokens: { total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
        warnings: [],
      };
    },
  });
  return { model, calls: () => calls };
}

describe(`fault injection (${TEST_STORE})`, () => {
  it("fails a step the given number of times: the step's retry policy runs, and the plan counts what fired", async () => {
    const plan = faultPlan([{ step: 'charge', fail: new RetryableError('card network down'), times: 2 }]);
    const engine = makeEngine({ workflows: [plan.workflow(flaky)] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start('flaky', {});
      expect(await engine.result(id, { timeout: '10s' })).toBe('charged');
      const step = (await engine.get(id)).steps[0];
      expect(step).toMatchObject({ name: 'charge', status: 'completed', attempts: 3 });
      expect(plan.fired()).toEqual([2]);
      plan.assertFired();
    } finally {
      await worker.stop();
    }
  });

  it('leaves the rest of ctx working under a plan: its signal, its schedule time and every primitive but the faulted step', async () => {
    const reader = workflow('reader', async (ctx) => {
      const { sleep } = ctx;
      await sleep('beat', '1ms');
      const got = await ctx.step('look', () => 'seen');
      return { aborted: ctx.signal.aborted, scheduledAt: ctx.scheduledAt, got, same: ctx.sleep === sleep, keys: Object.keys(ctx).includes('children') };
    });
    const plan = faultPlan([{ step: 'look', fail: new RetryableError('flaky'), times: 1 }]);
    const engine = makeEngine({ workflows: [plan.workflow(reader)] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start('reader', {});
      expect(await engine.result(id, { timeout: '10s' })).toEqual({ aborted: false, scheduledAt: null, got: 'seen', same: true, keys: true });
      expect(plan.fired()).toEqual([1]);
    } finally {
      await worker.stop();
    }
  });

  it('hangs an attempt until its timeout stops it; the next attempt succeeds', async () => {
    const slow = workflow('slow', async (ctx) => ctx.step('fetch', () => 'page', { timeout: '100ms', retry: { maxAttempts: 2, initialDelay: '10ms' } }));
    const plan = faultPlan([{ step: 'fetch', hang: true }]);
    const engine = makeEngine({ workflows: [plan.workflow(slow)] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start('slow', {});
      expect(await engine.result(id, { timeout: '10s' })).toBe('page');
      const t = await engine.get(id);
      expect(t.steps[0]?.attempts).toBe(2);
      expect(t.history.some((e) => e.type === 'step:retrying' && e.step.error?.code === 'STEP_TIMEOUT')).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('answers a model call with a 429 and Retry-After: the AI helper waits what it asks and calls again', async () => {
    const fake = okModel();
    const plan = faultPlan([{ model: true, status: 429, retryAfter: '1s' }]);
    const model = plan.model(fake.model);
    const greet = workflow('greet', async (ctx) => (await generateText(ctx, 'greet', { model, prompt: 'Say hello in French' })).text);
    const clock = new ManualClock();
    const engine = makeEngine({ workflows: [greet], clock });
    // A lease longer than the clock's moves below: the retry waits in-process, and a run still going
    // when the clock passes its lease would give the lease up and the call could be made again.
    const worker = await startWorker(engine, { leaseMs: 60_000 });
    try {
      const { id } = await engine.start(greet, {});
      // The retry waits the 1 s the 429 asked for, on the engine's clock. The clock moves only
      // once the attempt's failure is written: a second passing during the call would count in
      // the measured wait below (the retry is due a second after the failure, not the start).
      await eventually(async () => (await engine.get(id)).history.some((e) => e.type === 'step:retrying'), 10_000, 'the retry recorded');
      for (let i = 0; i < 50 && (await engine.get(id)).status !== 'succeeded'; i++) {
        await clock.advance('1s');
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await engine.result(id, { timeout: '10s' })).toBe('bonjour');
      expect(fake.calls()).toBe(1);
      const retried = (await engine.get(id)).history.find((e) => e.type === 'step:retrying');
      // Classified as the provider's rate limiting, its Retry-After read: the next attempt 1 s later.
      expect(retried).toMatchObject({ step: { error: { code: 'RETRYABLE', retryAfterMs: 1000, message: expect.stringContaining('rate limiting (429)') } } });
      const s = (retried as { step: { startedAt: number; wakeAt: number } }).step;
      expect(s.wakeAt - s.startedAt).toBe(1000);
      expect(plan.fired()).toEqual([1]);
    } finally {
      await worker.stop();
    }
  });

  it("makes the store unavailable for a span of the plan's clock: calls fail with STORE_UNAVAILABLE, then work again", async () => {
    const url = TEST_STORE === 'sqlite' ? `sqlite:${join(tempDir(), 'faults.db')}` : tempDbUrl();
    const real = await openStore(url);
    await real.migrate();
    const planClock = new ManualClock();
    const plan = faultPlan([{ store: 'unavailable', from: '1m', for: '30s' }], { clock: planClock });
    const quick = workflow('quick', async (ctx) => ctx.step('one', () => 1));
    const engine = new Engine({ store: plan.store(real), workflows: [quick] });
    try {
      const first = await engine.start(quick, {});
      await planClock.advance('1m');
      await expect(engine.start(quick, {})).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      await expect(engine.get(first.id)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      await planClock.advance('30s');
      expect((await engine.get(first.id)).status).toBe('pending');
      expect(plan.fired()[0]).toBeGreaterThanOrEqual(2);
    } finally {
      await engine.close();
      await real.close();
    }
  });

  it('kills the process as a named step starts: nothing more is written, and a new engine takes the task over after its lease', async () => {
    const url = TEST_STORE === 'sqlite' ? `sqlite:${join(tempDir(), 'kill.db')}` : tempDbUrl();
    const real = await openStore(url);
    await real.migrate();
    const runs = { a: 0, b: 0 };
    const two = workflow('two-steps', async (ctx) => {
      const a = await ctx.step('a', () => ++runs.a);
      const b = await ctx.step('b', () => ++runs.b);
      return { a, b };
    });
    const clock = new ManualClock();
    const plan = faultPlan([{ step: 'b', kill: true }]);
    const first = new Engine({ store: plan.store(real), workflows: [plan.workflow(two)], clock });
    const w1 = first.worker({ leaseMs: 5000, pollIntervalMs: 10 });
    await w1.start();
    const { id } = await first.start(two, {});
    expect(await plan.killed).toEqual({ step: 'b' });
    w1.abandon();
    // The dead process wrote nothing more: the task is still leased by it, and b never ran.
    expect(runs.b).toBe(0);
    const row = await real.getTask(id);
    expect(row?.status).toBe('running');
    expect((await real.getSteps(id)).map((x) => x.name)).not.toContain('b');
    const second = new Engine({ store: url, workflows: [plan.workflow(two)], clock });
    const w2 = second.worker({ leaseMs: 5000, pollIntervalMs: 10 });
    await w2.start();
    try {
      await clock.advance('6s'); // past the dead worker's lease
      const out = await second.result(id, { timeout: '20s' });
      // b ran once, in the new process (the kill fired once); a's recorded result was kept or, if
      // its checkpoint had not been written when the process died, a ran again: never lost.
      expect(out).toEqual({ a: runs.a, b: 1 });
      expect(runs.b).toBe(1);
      expect(plan.fired()).toEqual([1]);
      expect((await second.get(id)).steps.map((x) => [x.name, x.status])).toEqual([
        ['a', 'completed'],
        ['b', 'completed'],
      ]);
    } finally {
      await w2.stop();
      await second.close();
      await real.close();
    }
  });

  it("kills a worker process for real at a named step ('process'): SIGKILL, and the next process finishes the task", async () => {
    const db = `sqlite:${join(tempDir(), 'killed.db')}`;
    const first = spawnSync(process.execPath, ['--import', 'tsx', KILL_FIXTURE, db, 'kill'], { encoding: 'utf8', timeout: 60_000 });
    expect(first.signal).toBe('SIGKILL');
    expect(first.stdout).toContain('started');
    const second = spawnSync(process.execPath, ['--import', 'tsx', KILL_FIXTURE, db, 'resume'], { encoding: 'utf8', timeout: 60_000 });
    expect(second.status).toBe(0);
    expect(JSON.parse(second.stdout.trim().split('\n').at(-1) as string)).toMatchObject({ status: 'succeeded', output: { b: 'sent' } });
  });

  it('reports a fault that never fired (a mistyped step name) and refuses an unknown key', () => {
    const plan = faultPlan([
      { step: 'charge', fail: 'x' },
      { step: 'chrage', fail: 'x' },
    ]);
    expect(plan.unfired()).toHaveLength(2);
    expect(() => plan.assertFired()).toThrow(/2 fault\(s\) never fired.*chrage/);
    expect(() => faultPlan([{ step: 'charge', fail: 'x', time: 2 } as never])).toThrow(/unknown key "time"/);
    expect(() => faultPlan([{ step: 'charge' } as never])).toThrow(/none of/);
    expect(() => faultPlan([{ model: true, status: 200 }])).toThrow(/HTTP error status/);
    expect(() => faultPlan([{ step: 'b', kill: 'yes' as never }])).toThrow(/kill is true/);
  });

  it('works with checkResume: the content pipeline survives a failing CMS call and a crash at every write', async () => {
    const articles: string[] = [];
    const cms: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const key = String(req.headers['idempotency-key']);
        if (!articles.includes(key)) articles.push(key);
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `art-${articles.indexOf(key) + 1}`, replayed: false }));
      });
    });
    await new Promise<void>((r) => cms.listen(0, '127.0.0.1', r));
    const port = (cms.address() as { port: number }).port;
    const plan = faultPlan([{ step: 'publish', fail: new RetryableError('CMS answered 503'), times: 1 }]);
    try {
      const report = await checkResume(plan.workflow(contentPipeline), {
        input: { title: 'Typo', brief: 'Fix a typo', impact: 'low', cmsUrl: `http://127.0.0.1:${port}`, outbox: join(tempDir(), 'outbox.jsonl') },
        setup: () => void (articles.length = 0),
        effects: () => ({ articles: articles.length }),
        timeout: '20s',
      });
      expect(report.points.length).toBeGreaterThan(2);
      plan.assertFired();
    } finally {
      cms.close();
    }
  }, 120_000);
});
