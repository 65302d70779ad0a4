// A run that fails at its start (taken over after the task's deadline, cancelled meanwhile) still
// gives its code its first turns before it goes to its cleanup: an onCancel handler the code
// registers after a plain `await` runs, as it does in a run that did not fail at its start.
// The engine's clock is a ManualClock: the first worker is running the task before the deadline
// however long the machine takes to get it there, and the lease and the deadline pass when told.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { FAST, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';

describe('a run that fails at its start', () => {
  it('runs the onCancel handler its code registers after a plain await, when the task is taken over cancelling past its deadline', async () => {
    const clock = new ManualClock();
    const ran: string[] = [];
    let hang = true;
    const wf = workflow('late-and-cancelled', async (ctx) => {
      await Promise.resolve();
      ctx.onCancel(({ reason }) => void ran.push(`onCancel: ${reason}`));
      return ctx.step('work', () => (hang ? new Promise<string>(() => undefined) : 'done'));
    });
    const engine = makeEngine({ workflows: [wf], clock });
    const dying = engine.worker({ ...FAST, leaseMs: 1000 });
    await dying.start();
    const { id } = await engine.start(wf, undefined, { deadline: clock.now() + 60_000 });
    await waitForStatus(engine, id, 'running');
    dying.abandon(); // its heartbeats stop: the lease runs out, and it never hears the cancel
    expect((await engine.cancel(id, { reason: 'too late' })).status).toBe('cancelling');
    await clock.advance('61s'); // past the lease and the deadline
    hang = false;
    await startWorker(engine, { leaseMs: 1000 });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(
      transitionsOf(info)
        .map((t) => `${t.event}:${t.from}>${t.to}`)
        .slice(-2),
    ).toEqual(['reclaim:cancelling>cancelling', 'abort:cancelling>cancelled']);
    expect(ran).toEqual(['onCancel: too late']);
    await engine.close();
  });
});
