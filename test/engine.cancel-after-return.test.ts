// A cancel that lands while a step returns (during or just after its return, before or while its
// checkpoint is written) ends the task cancelled at once: the run does not wait for the cancel's
// grace period (`cancelGraceMs`, here ten minutes) nor for any timer of the engine's clock (a
// frozen ManualClock). A run that waited would fail this test by its vitest timeout.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';

const LONG_GRACE = { cancelGraceMs: 600_000, leaseMs: 3_600_000, heartbeatMs: 600_000 };

describe('a cancel that lands as a step returns', () => {
  it('cancelled from inside the step, awaited before it returns: the task ends cancelled without a timer', async () => {
    const clock = new ManualClock();
    let id = '';
    const engine = makeEngine({
      clock,
      workflows: [
        workflow('pay', async (ctx) => {
          const v = await ctx.step('charge', async () => {
            await engine.cancel(id, { reason: 'changed my mind' });
            return 42;
          });
          return ctx.step('ship', () => v + 1);
        }),
      ],
    });
    await startWorker(engine, LONG_GRACE);
    id = (await engine.start('pay')).id;
    await engine.result(id, { timeout: '15s' }).catch(() => undefined);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(info.cancelReason).toBe('changed my mind');
  }, 20_000);

  it('cancelled as the step returns (the cancel races its checkpoint): the task ends cancelled without a timer', async () => {
    const clock = new ManualClock();
    let id = '';
    const engine = makeEngine({
      clock,
      workflows: [
        workflow('pay', async (ctx) => {
          const v = await ctx.step('charge', () => {
            void engine.cancel(id, { reason: 'changed my mind' });
            return 42;
          });
          await ctx.step('ship', () => v + 1);
          await ctx.sleep('settle', '1h'); // frozen clock: only the cancel ends this
          return v;
        }),
      ],
    });
    await startWorker(engine, LONG_GRACE);
    id = (await engine.start('pay')).id;
    await engine.result(id, { timeout: '15s' }).catch(() => undefined);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    // A step that returned is recorded as completed, or not at all: never lost half-way. (On a slow
    // machine the cancel may land once the code has reached its sleep, whose row stays waiting.)
    const steps = info.steps.filter((s) => s.kind === 'step');
    expect(steps.map((s) => s.name)).toEqual(['charge', 'ship'].slice(0, steps.length));
    for (const s of steps) expect(s.status).toBe('completed');
    for (const s of info.steps.filter((x) => x.kind !== 'step')) expect(s).toMatchObject({ kind: 'sleep', name: 'settle', status: 'waiting' });
  }, 20_000);
});
