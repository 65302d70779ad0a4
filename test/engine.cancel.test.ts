import { describe, expect, it } from 'vitest';
import { IllegalTransitionError, TaskCancelledError, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, gate, makeEngine, startWorker, waitForStatus, transitionsOf } from './support/engine.ts';

describe('cancellation', () => {
  it('cancels a running task: cancelling, the step signal fires, then cancelled with the reason in history', async () => {
    const entered = gate();
    let signalReason: unknown;
    let after = 0;
    const wf = workflow('long-llm', async (ctx) => {
      await ctx.step(
        'generate',
        ({ signal }) =>
          new Promise((_, reject) => {
            entered.open();
            signal.addEventListener('abort', () => {
              signalReason = signal.reason;
              reject(signal.reason as Error);
            });
          }),
      );
      await ctx.step('publish', () => void after++);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('long-llm');
    await entered.promise;
    const cancelling = await engine.cancel(id, { reason: 'user clicked cancel' });
    expect(cancelling.status).toBe('cancelling');
    const err = await engine.result(id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskCancelledError);
    expect((err as TaskCancelledError).reason).toBe('user clicked cancel');
    expect(signalReason).toBeInstanceOf(TaskCancelledError);
    expect(after).toBe(0);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(info.lease).toBeNull();
    expect(transitionsOf(info).map((h) => `${h.event}:${h.to}`)).toEqual(['create:pending', 'claim:running', 'cancel:cancelling', 'abort:cancelled']);
    expect(transitionsOf(info)[2]?.detail).toEqual({ reason: 'user clicked cancel' });
  });

  it('ends a running task whose step ignores its signal within the cancel grace period', async () => {
    const entered = gate();
    const wf = workflow('stubborn', async (ctx) => {
      await ctx.step('ignore-signal', () => {
        entered.open();
        return new Promise(() => undefined); // never settles, never listens
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { cancelGraceMs: 100 });
    const { id } = await engine.start('stubborn');
    await entered.promise;
    await engine.cancel(id);
    await waitForStatus(engine, id, 'cancelled', 5000);
    const info = await engine.get(id);
    expect(info.lease).toBeNull();
    // The step never settled: nothing of it is recorded as done, and the task ended by the grace period.
    expect(info.steps.filter((st) => st.status === 'completed')).toEqual([]);
    expect(transitionsOf(info).map((h) => `${h.event}:${h.to}`)).toEqual(['create:pending', 'claim:running', 'cancel:cancelling', 'abort:cancelled']);
    expect(await engine.result(id).catch((e: unknown) => e)).toBeInstanceOf(TaskCancelledError);
  });

  it('shows the cancel on ctx.signal even to code that first looks at it afterwards', async () => {
    const entered = gate();
    const settle = gate();
    let stepSignal: AbortSignal | undefined;
    let seen: { aborted: boolean; reason: unknown } | null = null;
    const wf = workflow('late-look', async (ctx) => {
      // The step settles within the grace period without ever touching a signal; its result does
      // not count (it was told to stop), so the code receives the cancel and looks afterwards.
      // It settles when the test lets it, once the cancel has reached the run (not after a timer
      // that a slow cancel could outlast, which would let the task succeed).
      try {
        await ctx.step('slow', async ({ signal }) => {
          stepSignal = signal; // for the test to watch; the step itself never looks at it
          entered.open();
          await settle.promise;
          return 'done';
        });
      } catch {
        // interrupted by the cancel
      }
      seen = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { cancelGraceMs: 2000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id, { reason: 'changed my mind' });
    await eventually(() => stepSignal?.aborted === true, 10_000, 'the cancel to reach the step');
    settle.open();
    await waitForStatus(engine, id, 'cancelled', 5000);
    expect(seen).not.toBeNull();
    expect(seen!.aborted).toBe(true);
    expect(seen!.reason).toBeInstanceOf(TaskCancelledError);
  });

  it('tells a step still running when the workflow returns (the loser of a race) to stop, with and without a timeout', async () => {
    const reasons: Record<string, unknown> = {};
    const loser =
      (name: string) =>
      ({ signal }: { signal: AbortSignal }) =>
        new Promise<string>((resolve) => {
          // Polls rather than listens: the signal itself must say it was aborted.
          const timer = setInterval(() => {
            if (!signal.aborted) return;
            clearInterval(timer);
            reasons[name] = signal.reason;
            resolve('stopped');
          }, 5);
        });
    const wf = workflow('race', async (ctx) =>
      Promise.race([ctx.step('winner', () => 'won'), ctx.step('slow', loser('slow')), ctx.step('slow-timed', loser('slow-timed'), { timeout: '1h' })]),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id, { timeout: '10s' })).toBe('won');
    await eventually(() => Object.keys(reasons).length === 2, 5000, 'both losers to be told');
    expect(String((reasons.slow as Error).message)).toMatch(/the run has ended/);
    expect(String((reasons['slow-timed'] as Error).message)).toMatch(/the run has ended/);
  });

  it('times out a step that returns a thenable (not a native promise), and tells it to stop', async () => {
    let aborted = false;
    const wf = workflow('thenable', async (ctx) => {
      try {
        await ctx.step(
          'query-builder',
          ({ signal }) => {
            signal.addEventListener('abort', () => (aborted = true));
            // Like a query builder: `then` starts the work, which here never ends: only the
            // timeout can end the attempt (the test would hang without it).
            return { then: () => undefined } as unknown as PromiseLike<string>;
          },
          { timeout: '200ms', retry: { maxAttempts: 1 } },
        );
        return 'finished';
      } catch (e) {
        return (e as Error & { cause?: Error }).cause?.name ?? (e as Error).name;
      }
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id)).toBe('StepTimeoutError');
    expect(aborted).toBe(true);
  });

  it('cancels pending, waiting and paused tasks at once', async () => {
    const clock = new ManualClock();
    const wf = workflow('sleepy', async (ctx) => {
      await ctx.sleep('nap', '1h');
    });
    const engine = makeEngine({ workflows: [wf], clock });
    const pending = await engine.start('sleepy');
    expect((await engine.cancel(pending.id)).status).toBe('cancelled');

    const paused = await engine.start('sleepy');
    await engine.pause(paused.id);
    expect((await engine.cancel(paused.id, { reason: 'obsolete' })).status).toBe('cancelled');

    const worker = await startWorker(engine, { parkAfterMs: 100 });
    const waiting = await engine.start('sleepy');
    await waitForStatus(engine, waiting.id, 'waiting');
    expect(worker.inFlight).toBe(0);
    const c = await engine.cancel(waiting.id);
    expect(c.status).toBe('cancelled');
    expect(c.finishedAt).not.toBeNull();
  });

  it('never resumes a cancelled task: resume, retry and cancel again are illegal transitions', async () => {
    const wf = workflow('noop', async () => 1);
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start('noop');
    await engine.cancel(id);
    for (const cmd of [() => engine.resume(id), () => engine.cancel(id), () => engine.pause(id)]) {
      const e = await cmd().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(IllegalTransitionError);
      expect((e as IllegalTransitionError).message).toContain('it is cancelled');
    }
    // A retry needs the step to re-run it from (docs/rerun-and-fork.md); without one it is refused.
    await expect(engine.retry(id)).rejects.toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('fromStep') });
    // A worker started later does not pick it up: it runs a task started after it, and not this one.
    await startWorker(engine);
    const later = await engine.start('noop');
    expect(await engine.result(later.id)).toBe(1);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(info.runs).toBe(0);
  });

  it('aborts a step through AbortSignal.any with the run signal on a step timeout too', async () => {
    const wf = workflow('timeout-once', async (ctx) =>
      ctx.step('slow', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error))), {
        timeout: '30ms',
        retry: 1,
      }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('timeout-once');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.steps[0]?.error?.code).toBe('STEP_TIMEOUT');
    expect(info.steps[0]?.error?.message).toBe('Step "slow" timed out after 30ms');
  });
});
