// A parent's later run whose code does not reach its child starts again (it throws first, or its
// code changed between runs and returns): the children its earlier run started are still settled
// as each asked, from the starts its journal records. One started with onParentEnd 'cancel' is
// cancelled before the parent ends; one with 'abandon' goes on.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('child tasks: a later run that does not reach its child starts again', () => {
  it.each([
    { change: 'throws at once', error: 'the second run throws at once' },
    // Code changed between runs: it returns without the calls its journal records.
    { change: 'returns at once', error: 'NON_DETERMINISM' },
  ])('when it $change, the children started with cancel are cancelled and those started with abandon go on', async ({ change, error }) => {
    let runs = 0;
    const leaf = workflow('replay-leaf', async (ctx) => ctx.waitForEvent('go'));
    const parent = workflow('replay-parent', async (ctx) => {
      runs++;
      if (runs > 1 && change === 'throws at once') throw new Error('the second run throws at once');
      if (runs > 1) return 'changed';
      await ctx.startChild(leaf, undefined, { name: 'kept', onParentEnd: 'abandon' });
      await ctx.startChild(leaf, undefined, { name: 'dropped' });
      return ctx.waitForEvent('next');
    });
    const engine = makeEngine({ workflows: [parent, leaf] });
    // No run is kept in memory while parked: the signal's run replays the code from its start.
    await startWorker(engine, { keepParked: 0 });
    const { id } = await engine.start(parent);
    await eventually(async () => (await engine.get(id)).children.length === 2 && (await engine.get(id)).status === 'waiting', 10_000, 'the parent parked with two children');
    await engine.signal(id, 'next');
    await waitForStatus(engine, id, 'failed');
    expect(runs).toBe(2);
    const info = await engine.get(id);
    expect(info.status === 'failed' && `${info.error.code} ${info.error.message}`).toContain(error);
    // Each child's id is the output of the start that recorded it, with the option it asked for.
    const started = (name: string) => info.steps.find((s) => s.name === name)?.output as { id: string; onParentEnd: string };
    expect(started('kept').onParentEnd).toBe('abandon');
    expect(started('dropped').onParentEnd).toBe('cancel');
    const dropped = await engine.get(started('dropped').id);
    expect(dropped.status).toBe('cancelled');
    expect(dropped.cancelReason).toContain(`its parent task ${id}`);
    expect((await engine.get(started('kept').id)).status).toBe('waiting');
    await engine.close();
  });
});
