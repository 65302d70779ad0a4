// A worker that reclaims a task its own earlier run still holds (the lease expired under it: the
// clock jumped, or the process stalled past the lease) fences that run off: its in-flight step is
// aborted, the new run carries on, and stop() returns. Driven by a ManualClock; a failed parent's
// children are cancelled through the same path (issue 30: a parent failed by its deadline).
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('a worker reclaiming its own task', () => {
  it('aborts the earlier run of a task it reclaims, and stops cleanly afterwards; a parent failed by its deadline cancels its child', async () => {
    const seen: string[] = [];
    const leaf = workflow('self-reclaim-leaf', async (ctx) => {
      await ctx.step(
        'generate',
        ({ signal }) =>
          new Promise((_, reject) => {
            seen.push('started');
            signal.addEventListener('abort', () => {
              seen.push('aborted');
              reject(signal.reason as Error);
            });
          }),
      );
    });
    const parent = workflow('self-reclaim-parent', async (ctx) => ctx.child(leaf, undefined));
    const clock = new ManualClock();
    const engine = makeEngine({ workflows: [parent, leaf], clock });
    const worker = await startWorker(engine, { concurrency: 4, parkAfterMs: 1 });
    const { id } = await engine.start(parent, undefined, { deadline: clock.now() + 60_000 });
    await eventually(async () => seen.includes('started'), 20_000, 'the child to run');
    await eventually(async () => (await engine.get(id)).status === 'waiting', 20_000, 'the parent to park');
    // Past the parent's deadline and every lease: the worker reclaims the child it still runs.
    await clock.advance('2m');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info).toMatchObject({ error: { code: 'DEADLINE_EXCEEDED' } });
    await waitForStatus(engine, info.children[0]?.id as string, 'cancelled');
    // Every run of the child ended: the first one was aborted, none is left hanging.
    await eventually(async () => seen.filter((s) => s === 'aborted').length === seen.filter((s) => s === 'started').length, 20_000, 'every run of the child to end');
    await worker.stop();
  });
});
