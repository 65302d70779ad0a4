// A parent's later run whose code throws before it reaches its child starts again (code changed
// between runs, or a branch that failed first): the children its earlier run started are still
// settled as each asked, from the starts its journal records. One started with onParentEnd
// 'cancel' is cancelled before the parent ends; one with 'abandon' goes on.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('child tasks: a replay that throws before its child starts', () => {
  it('cancels the children started with cancel and leaves those started with abandon, though the run never reached their starts', async () => {
    let runs = 0;
    const leaf = workflow('replay-throw-leaf', async (ctx) => ctx.waitForEvent('go'));
    const parent = workflow('replay-throw-parent', async (ctx) => {
      runs++;
      if (runs > 1) throw new Error('the second run throws at once');
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
    expect(info.status === 'failed' && info.error.message).toContain('the second run throws at once');
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
