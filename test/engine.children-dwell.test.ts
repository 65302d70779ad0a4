// A parent failed by its dwell bound while it waits for a child: the child (onParentEnd 'cancel',
// the default) is cancelled before the parent ends failed with the dwell error, and an abandoned
// child is left running. (The scanner's expire makes the parent due with the error; the worker
// that claims it fails the run, whose cleanup cancels the children and waits for their ends, as any
// run that fails for good does.) A parent whose run stalls past dwell.running fails the same way:
// its run is fenced off, and the worker that reclaims it fails it, running its compensations and
// cancelling its children.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { advanceUntil, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('child tasks: a parent failed by its dwell bound', () => {
  it('cancels its child before it ends failed with the dwell error; an abandoned child goes on', async () => {
    const clock = new ManualClock();
    const leaf = workflow('dwell-leaf', async (ctx) => ctx.waitForEvent('go'));
    const parent = workflow(
      'dwell-parent',
      async (ctx) => {
        await ctx.startChild(leaf, undefined, { name: 'kept', onParentEnd: 'abandon' });
        return ctx.child(leaf, undefined, { name: 'awaited' });
      },
      // The cleanup that cancels the child has its own deadline on the engine clock, which the test moves fast.
      { dwell: { waiting: { after: '1h', then: 'fail' } }, cleanupTimeout: '1d' },
    );
    const engine = makeEngine({ workflows: [parent, leaf], clock });
    await startWorker(engine, { dwellScanMs: 50 });
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'waiting');
    const children = async () => (await engine.get(id)).children;
    await advanceUntil(clock, async () => (await children()).length === 2 && (await children()).every((c) => c.status === 'waiting'), 'both children waiting');
    await clock.advance('1h');
    await advanceUntil(clock, async () => (await engine.get(id)).status === 'failed', 'the parent failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    // Each child's id is the output of the parent's call that started it.
    const idOf = (name: string): string => (info.steps.find((s) => s.name === name)?.output as { id: string }).id;
    const status = new Map((await children()).map((c) => [c.id, c.status]));
    expect(status.get(idOf('awaited'))).toBe('cancelled');
    expect(status.get(idOf('kept'))).toBe('waiting');
    const awaited = await engine.get(idOf('awaited'));
    expect(awaited.cancelReason).toContain(`its parent task ${id}`);
    // (Which ended first is not compared by time: the test moves the engine clock while both end.)
  });

  it('a parent whose run stalls past dwell.running is taken over and failed: its compensation runs and its child is cancelled', async () => {
    const clock = new ManualClock();
    const undone: string[] = [];
    const leaf = workflow('stall-leaf', async (ctx) => ctx.waitForEvent('go'));
    const parent = workflow(
      'stall-parent',
      async (ctx) => {
        await ctx.step('reserve', () => 'R1', { compensate: (r: string) => void undone.push(r) });
        await ctx.startChild(leaf, undefined, { name: 'helper' });
        // Stalls until its signal fires.
        return ctx.step('crawl', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })));
      },
      // The cleanup's own deadline is on the engine clock, which the test moves fast.
      { dwell: { running: { after: '10m', then: 'fail' } }, cleanupTimeout: '1d' },
    );
    const engine = makeEngine({ workflows: [parent, leaf], clock });
    // A lease far longer than the clock moves: only the dwell bound stops the run.
    await startWorker(engine, { dwellScanMs: 50, leaseMs: 7 * 86_400_000 });
    const { id } = await engine.start(parent);
    await eventually(async () => (await engine.get(id)).children.some((c) => c.status === 'waiting'), 10_000, 'the child waiting');
    await clock.advance('11m');
    await advanceUntil(clock, async () => (await engine.get(id)).status === 'failed', 'the parent failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    expect(undone).toEqual(['R1']);
    expect(info.steps.find((s) => s.name === 'compensate:reserve')?.status).toBe('completed');
    const [child] = info.children;
    // The parent's cleanup cancelled the child and waited for its end before the parent's end.
    const ended = await engine.get(child!.id);
    expect(ended.status).toBe('cancelled');
    expect(ended.cancelReason).toContain(`its parent task ${id}`);
  });
});
