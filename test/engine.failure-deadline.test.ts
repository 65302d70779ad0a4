import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('task deadlines', () => {
  it("fails the task with DEADLINE_EXCEEDED at the start deadline and fires the running step's signal", async () => {
    const clock = new ManualClock();
    const reasons: string[] = [];
    let started = false;
    const wf = workflow('slow-job', async (ctx) => {
      await ctx.step(
        'crawl',
        ({ signal }) =>
          new Promise<string>((_resolve, reject) => {
            started = true;
            signal.addEventListener('abort', () => {
              reasons.push((signal.reason as { code?: string }).code ?? 'none');
              reject(signal.reason as Error);
            });
          }),
        { retry: 5 },
      );
      return 'never';
    });
    const engine = makeEngine({ workflows: [wf], clock });
    // The lease is on the engine's clock too: long enough to outlive the jump.
    await startWorker(engine, { leaseMs: 86_400_000 });
    const { id } = await engine.start('slow-job', undefined, { deadline: clock.now() + 3_600_000 });
    expect((await engine.get(id)).deadline).toBe(clock.now() + 3_600_000);
    await eventually(() => started, 10_000, 'the step to start');
    await clock.advance('59m');
    expect((await engine.get(id)).status).toBe('running');
    await clock.advance('1m');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
    expect(reasons).toEqual(['DEADLINE_EXCEEDED']);
    // The interrupted attempt is not retried: no retry row was written for it.
    expect(info.steps.filter((s) => s.status === 'retrying')).toEqual([]);
  });

  it('wakes a task parked in a long sleep at the workflow timeout and fails it', async () => {
    const clock = new ManualClock();
    let after = 0;
    const wf = workflow(
      'sleepy',
      async (ctx) => {
        await ctx.step('before', () => 1);
        await ctx.sleep('nap', '7d');
        return ctx.step('after', () => ++after);
      },
      { timeout: '1d' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const start = clock.now();
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const parked = await engine.get(id);
    expect(parked.deadline).toBe(start + 86_400_000);
    expect(parked.runAt).toBe(start + 86_400_000);
    await clock.advance('1d');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
    expect(after).toBe(0);
  });

  it('takes the earlier of the start deadline and the workflow timeout, and refuses a deadline already past', async () => {
    const clock = new ManualClock();
    const wf = workflow('bounded', async () => 'x', { timeout: '1h' });
    const engine = makeEngine({ workflows: [wf], clock });
    const a = await engine.start(wf, undefined, { deadline: new Date(clock.now() + 60_000) });
    const b = await engine.start(wf, undefined, { deadline: clock.now() + 7_200_000 });
    expect((await engine.get(a.id)).deadline).toBe(clock.now() + 60_000);
    expect((await engine.get(b.id)).deadline).toBe(clock.now() + 3_600_000);
    await expect(engine.start(wf, undefined, { deadline: clock.now() - 1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/already past/) });
    expect(() => workflow('bad-timeout', async () => 1, { timeout: 'soon' })).toThrow(/timeout/);
  });

  it('a per-step timeout stays a retryable failure within the task deadline', async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const wf = workflow(
      'step-timeout',
      async (ctx) =>
        ctx.step(
          'call',
          ({ attempt, signal }) => {
            attempts = attempt;
            if (attempt === 2) return 'second';
            return new Promise<string>((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
          },
          { timeout: '1m', retry: { maxAttempts: 2, initialDelay: 1, jitter: false } },
        ),
      { timeout: '1h' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000 });
    const { id } = await engine.start(wf);
    await eventually(() => attempts === 1, 10_000, 'the first attempt');
    await clock.advance('1m');
    // The retry is due 1 ms after the timed-out attempt was recorded.
    await eventually(async () => (await engine.get(id)).steps[0]?.status === 'retrying', 10_000, 'the timeout recorded');
    await eventually(
      async () => {
        await clock.advance(1);
        return attempts === 2;
      },
      10_000,
      'the second attempt',
    );
    expect(await engine.result(id)).toBe('second');
    const info = await engine.get(id);
    expect(info.history.some((e) => e.type === 'step:retrying' && e.step.error?.code === 'STEP_TIMEOUT' && e.step.error.class?.kind === 'transient')).toBe(true);
  });

  it('a retry lifts a deadline that has passed, or sets the one it is given', async () => {
    const clock = new ManualClock();
    const wf = workflow(
      'late',
      async (ctx) => {
        await ctx.sleep('wait', '2h');
        return 'done';
      },
      { timeout: '1h' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1h');
    await waitForStatus(engine, id, 'failed');
    const retried = await engine.retry(id, { deadline: clock.now() + 86_400_000 });
    expect(retried.deadline).toBe(clock.now() + 86_400_000);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('2h');
    expect(await engine.result(id)).toBe('done');
  });
});
