// A parent that fails for good while its code cannot get to its end (it awaits a promise of its own
// that never settles, past the task's deadline): its run ends whatever the code still does, and its
// cleanup cancels its children (onParentEnd 'cancel') and waits for their ends
// before the parent's end is written. An abandoned child is left alone.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

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
});
