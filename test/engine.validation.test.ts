// Options and commands that are wrong in ways people actually get them wrong: each gets a typed
// error at the call, never a worker that silently does nothing or a warning in the user's logs.
import { describe, expect, it } from 'vitest';
import { IllegalTransitionError, transition, userEvents, workflow } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe(`validation (${TEST_STORE})`, () => {
  it('refuses an unknown workflow option (a typo such as tiemout) at definition time', () => {
    expect(() => workflow('typo', async () => 1, { tiemout: '1h' } as never)).toThrow(/unknown option "tiemout" \(known: version, compatibleVersions, input, retry, concurrency\)/);
    expect(() => workflow('typo', async () => 1, { retyr: 3, concurency: 2 } as never)).toThrow(/unknown options "retyr", "concurency"/);
    expect(workflow('fine', async () => 1, { version: 2, retry: 3, concurrency: 4 }).version).toBe('2');
  });

  it('refuses worker counts that are not whole numbers ≥ 1 instead of flooring them to a worker that never claims', () => {
    const engine = makeEngine({ workflows: [workflow('w', async () => 1)] });
    for (const bad of [0.5, 0, -1, Number.NaN, 2.5]) {
      expect(() => engine.worker({ concurrency: bad })).toThrow(/concurrency must be a whole number ≥ 1/);
      expect(() => engine.worker({ claimBatch: bad })).toThrow(/claimBatch must be a whole number ≥ 1/);
    }
    expect(() => engine.worker({ leaseMs: 0 })).toThrow(/leaseMs must be a positive number/);
  });

  it('lists only the events a person can send in an illegal-transition error and in explain', async () => {
    const err = (() => {
      try {
        transition({ status: 'pending' }, 'complete', 't1');
      } catch (e) {
        return e as IllegalTransitionError;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(IllegalTransitionError);
    expect(err?.legalEvents).toEqual(['cancel', 'pause']);
    expect(err?.message).not.toContain('claim');
    expect(userEvents({ status: 'running' })).toEqual(['cancel', 'pause']);
    expect(userEvents({ status: 'failed' })).toEqual(['retry']);

    const engine = makeEngine({ workflows: [workflow('idle', async () => 1)] });
    const { id } = await engine.start('idle', undefined);
    expect((await engine.explain(id)).legalEvents).toEqual(['cancel', 'pause']);
    await expect(engine.retry(id)).rejects.toThrow('Legal events: cancel, pause.');
  });

  it('lets 600 callers wait for results at once without a MaxListenersExceededWarning', async () => {
    const wf = workflow('quick', async (ctx, n: number) => ctx.step('double', () => n * 2));
    const engine = makeEngine({ workflows: [wf] });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const ids = await Promise.all(Array.from({ length: 30 }, (_, i) => engine.start(wf, i).then((r) => r.id)));
      const waits = Array.from({ length: 600 }, (_, i) => engine.result(ids[i % ids.length] as string, { timeout: '60s' }));
      await startWorker(engine, { concurrency: 16 });
      const results = await Promise.all(waits);
      expect(results[31]).toBe(2);
      await waitForStatus(engine, ids[0] as string, 'succeeded');
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
