// Scheduled work falls due on time: an idle worker sleeps until the next task is due (a delayed
// start, a parked sleep), not until its next poll.
import { describe, expect, it, vi } from 'vitest';
import { Engine, openStore, systemClock, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus, transitionsOf } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

/** Polls so rarely that only the next-due wake-up can explain a task running in time. */
const RARE_POLL = { pollIntervalMs: 600_000 };

describe('scheduled work', () => {
  it('starts a delayed task when it falls due, though the worker polls only every ten minutes', async () => {
    const wf = workflow('delayed', async (ctx) => ctx.step('ran-at', () => Date.now()));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, RARE_POLL);
    const startedAt = Date.now();
    const { id } = await engine.start(wf, undefined, { delay: '300ms' });
    const ranAt = await engine.result<number>(id, { timeout: '20s' });
    expect(ranAt - startedAt).toBeGreaterThanOrEqual(300);
  });

  it('resumes a task parked on a sleep when the sleep ends, though the worker polls only every ten minutes', async () => {
    const wf = workflow('napper', async (ctx) => {
      await ctx.step('before', () => 'b');
      await ctx.sleep('nap', '400ms');
      return ctx.step('after', () => 'a');
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { ...RARE_POLL, parkAfterMs: 50 });
    const { id } = await engine.start(wf);
    // Parked: seen in the log, which keeps it (the task is waiting only until the sleep ends, a
    // moment a busy machine can let a status poll miss).
    await eventually(async () => transitionsOf(await engine.get(id)).some((t) => t.event === 'park'), 10_000, 'the task to park on its sleep');
    expect(await engine.result(id, { timeout: '20s' })).toBe('a');
    expect(transitionsOf(await engine.get(id)).map((h) => h.event)).toEqual(['create', 'claim', 'park', 'claim', 'complete']);
  });

  it("follows the engine clock: advancing a manual clock past a task's due time wakes the idle worker", async () => {
    const clock = new ManualClock();
    const wf = workflow('in-an-hour', async (ctx) => ctx.step('go', () => 'went'));
    const inner = await openStore(tempDbUrl());
    let claimed = 0;
    const store = spyStore(inner, {
      claim: (original) => async (r) => {
        const got = await original(r);
        claimed++;
        return got;
      },
    });
    const engine = new Engine({ store, workflows: [wf], clock });
    try {
      await startWorker(engine, RARE_POLL);
      await eventually(() => claimed >= 1, 10_000, 'the first claim');
      const before = claimed;
      const { id } = await engine.start(wf, undefined, { delay: '1h' });
      // The start wakes the worker: its claim finds nothing due, and it goes back to sleep.
      await eventually(() => claimed > before, 10_000, 'the claim after the start');
      expect((await engine.get(id)).status).toBe('pending');
      await clock.advance('1h');
      expect(await engine.result(id, { timeout: '20s' })).toBe('went');
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('runs a task that fell due while the worker was claiming, without waiting for the next poll', async () => {
    const clock = new ManualClock();
    const inner = await openStore(tempDbUrl());
    let slowClaim = false;
    let claimed = 0;
    // A claim that takes so long that the task it did not see falls due meanwhile.
    const store = spyStore(inner, {
      claim: (original) => async (r) => {
        const got = await original(r);
        claimed++;
        if (slowClaim) {
          slowClaim = false;
          await clock.advance('1h');
        }
        return got;
      },
    });
    const wf = workflow('due-mid-claim', async (ctx) => ctx.step('go', () => 'went'));
    const engine = new Engine({ store, workflows: [wf], clock });
    try {
      await startWorker(engine, RARE_POLL);
      await eventually(() => claimed >= 1, 10_000, 'the first claim'); // the worker is idle
      slowClaim = true;
      const { id } = await engine.start(wf, undefined, { delay: '1h' }); // wakes the worker: a claim
      await waitForStatus(engine, id, 'succeeded', 20_000); // real time: the engine's clock jumped
      expect(await engine.result(id)).toBe('went');
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('does not spin on a task due in a month (beyond the longest timer): the worker just polls', async () => {
    const inner = await openStore(tempDbUrl());
    let claims = 0;
    let ticks = 0;
    const store = spyStore(inner, {
      claim: (original) => (r) => {
        claims++;
        return original(r);
      },
      // Called by every heartbeat tick of the worker (its sweep of abandoned cancelling tasks).
      expireLeases: (original) => (r) => {
        ticks++;
        return original(r);
      },
    });
    const wf = workflow('next-month', async (ctx) => ctx.step('go', () => 'went'));
    const engine = new Engine({ store, workflows: [wf] });
    try {
      // Heartbeats as often as polls: the count of heartbeats measures the time that passed.
      await startWorker(engine, { pollIntervalMs: 200, heartbeatMs: 200 });
      await engine.start(wf, undefined, { delay: 30 * 24 * 3_600_000 });
      claims = 0;
      ticks = 0;
      await eventually(() => ticks >= 5, 20_000, 'five heartbeats');
      expect(claims).toBeGreaterThanOrEqual(1); // it does poll
      expect(claims).toBeLessThanOrEqual(2 * ticks + 2); // about one per poll, not one per millisecond
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('a system-clock sleep longer than the longest timer does not end early, ends when due, and can be aborted', async () => {
    // Fake timers, as Node's: a timer longer than 2^31 - 1 ms would fire after 1 ms.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      let ended: string | null = null;
      const long = systemClock.sleep(2 ** 31 + 10_000).then(() => (ended = 'resolved'));
      await vi.advanceTimersByTimeAsync(2 ** 31 - 1);
      expect(ended).toBeNull(); // 2^31 - 1 ms passed, 10 s are left
      await vi.advanceTimersByTimeAsync(10_001);
      await long;
      expect(ended).toBe('resolved');
      const stop = new AbortController();
      let aborted: string | null = null;
      const sleeping = systemClock.sleep(2 ** 31 + 10_000, stop.signal).then(
        () => (aborted = 'resolved'),
        () => (aborted = 'aborted'),
      );
      await vi.advanceTimersByTimeAsync(2 ** 31);
      expect(aborted).toBeNull();
      stop.abort(new Error('enough'));
      await sleeping;
      expect(aborted).toBe('aborted');
    } finally {
      vi.useRealTimers();
    }
  });
});
