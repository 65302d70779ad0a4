// A parent that fails for good while its code cannot get to its end (it awaits a promise of its own
// that never settles, past the task's deadline): its run ends whatever the code still does, and its
// cleanup cancels its children (onParentEnd 'cancel') and waits for their ends before the parent's
// end is written. An abandoned child is left alone.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, gate, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('child tasks: a parent failed while its code is stuck', () => {
  it('cancels its children before it ends failed, though its code never reaches its end', async () => {
    const clock = new ManualClock();
    const leaf = workflow('stuck-leaf', async (ctx) => ctx.waitForEvent('go'));
    const parent = workflow('stuck-parent', async (ctx) => {
      await ctx.startChild(leaf, undefined, { name: 'helper' });
      await ctx.startChild(leaf, undefined, { name: 'kept', onParentEnd: 'abandon' });
      // Not a ctx call (workflow code should await only those): the code never gets past it.
      return new Promise<never>(() => undefined);
    });
    const engine = makeEngine({ workflows: [parent, leaf], clock });
    await startWorker(engine, { leaseMs: 86_400_000, cancelGraceMs: 100 });
    const { id } = await engine.start(parent, undefined, { deadline: clock.now() + 3_600_000 });
    await eventually(async () => (await engine.get(id)).children.filter((c) => c.status === 'waiting').length === 2, 10_000, 'both children waiting');
    await clock.advance('1h');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
    const idOf = (name: string): string => (info.steps.find((s) => s.name === name)?.output as { id: string }).id;
    // Read once the parent has ended: the cancel is not eventual.
    const helper = await engine.get(idOf('helper'));
    expect(helper.status).toBe('cancelled');
    expect(helper.cancelReason).toContain(`its parent task ${id} ended`);
    expect((await engine.get(idOf('kept'))).status).toBe('waiting');
  });

  it("fails with COMPENSATION_FAILED naming 'child tasks' when a child's end takes longer than the parent's cleanupTimeout", async () => {
    const clock = new ManualClock();
    const released = gate();
    let cleaning = false;
    const leaf = workflow(
      'slow-cleanup-leaf',
      async (ctx) => {
        ctx.onCancel(async () => {
          cleaning = true;
          await released.promise; // the child's cleanup hangs
        });
        return ctx.waitForEvent('go');
      },
      // Its own cleanup deadline is far off: only the parent's passes.
      { cleanupTimeout: '1d' },
    );
    const parent = workflow(
      'slow-cleanup-parent',
      async (ctx) => {
        await ctx.startChild(leaf, undefined, { name: 'helper' });
        return new Promise<never>(() => undefined);
      },
      { cleanupTimeout: '10m' },
    );
    const engine = makeEngine({ workflows: [parent, leaf], clock });
    await startWorker(engine, { leaseMs: 86_400_000, cancelGraceMs: 100 });
    try {
      const { id } = await engine.start(parent, undefined, { deadline: clock.now() + 3_600_000 });
      await eventually(async () => (await engine.get(id)).children.some((c) => c.status === 'waiting'), 10_000, 'the child waiting');
      await clock.advance('1h');
      await eventually(() => cleaning, 10_000, "the child's cleanup to start");
      await clock.advance('11m');
      await waitForStatus(engine, id, 'failed');
      const info = await engine.get(id);
      if (info.status !== 'failed') throw new Error('unreachable');
      expect(info.error.code).toBe(ERROR_CODES.COMPENSATION_FAILED);
      expect(info.error.message).toContain('the cancel of its child tasks');
      expect(info.error).toMatchObject({ data: { failedCompensations: 'child tasks' }, cause: { code: 'DEADLINE_EXCEEDED' } });
    } finally {
      released.open();
    }
  });
});
