import { describe, expect, it } from 'vitest';
import { NonRetryableError, RetryableError, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus, transitionsOf } from './support/engine.ts';

describe('step retries', () => {
  it('retries a transient failure with the same idempotency key and shows the previous error to the next attempt', async () => {
    const seen: Array<{ attempt: number; key: string; last: string | undefined }> = [];
    const wf = workflow('flaky', async (ctx) =>
      ctx.step(
        'call',
        ({ attempt, idempotencyKey, lastError }) => {
          seen.push({ attempt, key: idempotencyKey, last: lastError?.message });
          if (attempt < 3) throw new Error(`timeout #${attempt}`);
          return 'ok';
        },
        { retry: { maxAttempts: 5, initialDelay: 1, maxDelay: 5 } },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('flaky');
    expect(await engine.result(id)).toBe('ok');
    expect(seen).toEqual([
      { attempt: 1, key: `v1:${id}:call#1`, last: undefined },
      { attempt: 2, key: `v1:${id}:call#1`, last: 'timeout #1' },
      { attempt: 3, key: `v1:${id}:call#1`, last: 'timeout #2' },
    ]);
    expect((await engine.get(id)).steps[0]).toMatchObject({ status: 'completed', attempts: 3 });
  });

  it('fails a step at once on NonRetryableError and keeps the error code on the task', async () => {
    let calls = 0;
    const wf = workflow('fatal', async (ctx) =>
      ctx.step(
        'charge',
        () => {
          calls++;
          throw new NonRetryableError('card declined');
        },
        { retry: 5 },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('fatal');
    const err = (await engine.result(id).catch((e: unknown) => e)) as Error & { code: string; cause: Error & { code: string; cause: Error & { code: string; retryable: boolean } } };
    expect(calls).toBe(1);
    expect(err.code).toBe('TASK_FAILED');
    expect(err.cause.code).toBe('STEP_FAILED');
    expect(err.cause.cause.code).toBe('NON_RETRYABLE');
    expect(err.cause.cause.retryable).toBe(false);
  });

  it('gives up after maxAttempts and records every attempt count', async () => {
    const wf = workflow('always-fails', async (ctx) =>
      ctx.step(
        'x',
        () => {
          throw new Error('nope');
        },
        { retry: { maxAttempts: 3, initialDelay: 1 } },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('always-fails');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ status: 'failed', attempts: 3 });
    expect(info.status === 'failed' && info.error.message).toBe('Step "x" failed after 3 attempts: nope');
  });

  it('parks the task during a long backoff (no worker slot held) and resumes it when due', async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const wf = workflow('long-backoff', async (ctx) => {
      const before = await ctx.step('before', () => 'b');
      const value = await ctx.step('rate-limited', ({ attempt }) => {
        attempts = attempt;
        if (attempt === 1) throw new RetryableError('429 Too Many Requests', { retryAfterMs: 3_600_000 });
        return 'done';
      });
      return `${before}-${value}`;
    });
    const engine = makeEngine({ workflows: [wf], clock });
    const worker = await startWorker(engine, { parkAfterMs: 1000 });
    const { id } = await engine.start('long-backoff');
    await waitForStatus(engine, id, 'waiting');
    const parked = await engine.get(id);
    expect(worker.inFlight).toBe(0);
    expect(parked.runAt).toBe(clock.now() + 3_600_000);
    expect(parked.wait).toMatchObject({ kind: 'retry', step: 'rate-limited', attempt: 2 });
    expect(parked.steps[1]).toMatchObject({ status: 'retrying', attempts: 1 });
    expect((await engine.explain(id)).summary).toMatch(/Waiting for the retry of step "rate-limited" \(attempt 2\) until/);
    await clock.advance('59m');
    // An hour's backoff: after 59 minutes the task still waits, its wake-up a minute away.
    expect(await engine.get(id)).toMatchObject({ status: 'waiting', runAt: parked.runAt });
    expect(parked.runAt! - clock.now()).toBe(60_000);
    await clock.advance('1m');
    expect(await engine.result(id)).toBe('b-done');
    expect(attempts).toBe(2);
    const info = await engine.get(id);
    expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'park', 'claim', 'complete']);
  });

  it('retries a failed task from the failed step; completed steps are not re-run; the step sees the previous error', async () => {
    const runs: Record<string, number> = {};
    let broken = true;
    let lastSeen: string | undefined;
    const wf = workflow('task-retry', async (ctx) => {
      await ctx.step('one', () => void (runs.one = (runs.one ?? 0) + 1));
      await ctx.step('two', ({ lastError }) => {
        runs.two = (runs.two ?? 0) + 1;
        lastSeen = lastError?.message;
        if (broken) throw new NonRetryableError('schema mismatch');
      });
      await ctx.step('three', () => void (runs.three = (runs.three ?? 0) + 1));
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('task-retry');
    await waitForStatus(engine, id, 'failed');
    broken = false;
    const retried = await engine.retry(id);
    expect(retried.status).toBe('pending');
    expect(await engine.result(id)).toBe('ok');
    expect(runs).toEqual({ one: 1, two: 2, three: 1 });
    expect(lastSeen).toBe('schema mismatch');
    const info = await engine.get(id);
    expect(info.retries).toBe(1);
    expect(transitionsOf(info).map((h) => `${h.event}:${h.to}`)).toEqual(['create:pending', 'claim:running', 'fail:failed', 'retry:pending', 'claim:running', 'complete:succeeded']);
  });

  it('times out a step attempt: its signal fires and the attempt is retried', async () => {
    const aborted: string[] = [];
    const wf = workflow('slow-step', async (ctx) =>
      ctx.step(
        'llm',
        ({ signal, attempt }) =>
          new Promise<string>((resolve, reject) => {
            if (attempt === 2) return resolve('fast second time');
            signal.addEventListener('abort', () => {
              aborted.push((signal.reason as Error).name);
              reject(signal.reason as Error);
            });
          }),
        { timeout: 50, retry: { maxAttempts: 2, initialDelay: 1 } },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('slow-step');
    expect(await engine.result(id)).toBe('fast second time');
    expect(aborted).toEqual(['StepTimeoutError']);
  });

  it('durable sleep parks the task and wakes it at the right time', async () => {
    const clock = new ManualClock();
    const wf = workflow('sleeper', async (ctx) => {
      await ctx.sleep('cool-down', '10m');
      return ctx.step('after', () => 'awake');
    });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { parkAfterMs: 1000 });
    const { id } = await engine.start('sleeper');
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.get(id)).wait).toMatchObject({ kind: 'sleep', step: 'cool-down' });
    await clock.advance('10m');
    expect(await engine.result(id)).toBe('awake');
    await eventually(async () => (await engine.get(id)).steps[0]?.status === 'completed');
  });

  it('keeps a step that completed beside the failed one when the task is retried: its side effect is not repeated', async () => {
    let broken = true;
    const effects: string[] = [];
    const wf = workflow('branches', async (ctx) => {
      const [a, b] = await Promise.allSettled([
        ctx.step('a', () => {
          effects.push('a');
          if (broken) throw new NonRetryableError('a is broken');
          return 'A';
        }),
        ctx.step('b', async () => {
          await new Promise((r) => setTimeout(r, 150)); // completes after a has failed
          effects.push('b');
          return 'B';
        }),
      ]);
      if (a.status === 'rejected') throw a.reason;
      return [a.value, b.status === 'fulfilled' ? b.value : null];
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    expect(effects.sort()).toEqual(['a', 'b']);
    broken = false;
    const retried = await engine.retry(id);
    expect(retried.status).toBe('pending');
    const retryEntry = (await engine.get(id)).history.find((e) => e.type === 'transition' && e.event === 'retry');
    expect(retryEntry?.type === 'transition' && retryEntry.detail).toMatchObject({ fromStep: 'a', forgotten: [] });
    expect(await engine.result(id, { timeout: '10s' })).toEqual(['A', 'B']);
    expect(effects.sort()).toEqual(['a', 'a', 'b']); // b ran once, a twice
  });

  it('re-runs every failed branch on retry, keeping only the ones that completed', async () => {
    let broken = true;
    const runs: string[] = [];
    const wf = workflow('two-broken', async (ctx) => {
      const results = await Promise.allSettled(
        ['a', 'b', 'c'].map((name) =>
          ctx.step(name, () => {
            runs.push(name);
            if (broken && name !== 'c') throw new NonRetryableError(`${name} is broken`);
            return name.toUpperCase();
          }),
        ),
      );
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
      return results.map((r) => (r.status === 'fulfilled' ? r.value : null));
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    broken = false;
    await engine.retry(id);
    expect(await engine.result(id, { timeout: '10s' })).toEqual(['A', 'B', 'C']);
    expect(runs.sort()).toEqual(['a', 'a', 'b', 'b', 'c']); // c completed beside them: kept, not re-run
  });
});
