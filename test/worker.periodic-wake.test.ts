import { describe, expect, it } from 'vitest';
import { PeriodicScheduler } from '../src/worker/periodic.ts';
import { ManualClock } from '../src/manual-clock.ts';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('a periodic job that asks to run earlier than its period', () => {
  it('runs at the time it asked for with wakeAt, then keeps its period', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    const at: number[] = [];
    const t0 = clock.now();
    const job = scheduler.add({
      name: 'deadline',
      periodMs: 1000,
      run: async () => {
        at.push(clock.now() - t0);
        if (at.length === 1) job.wakeAt(t0 + 250);
      },
    });
    await tick(); // the first run, at once
    await clock.advance(2300);
    expect(at).toEqual([0, 250, 1250, 2250]);
    await scheduler.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('wakes a waiting job that asks for an earlier time, keeping the earliest of several asks', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    const at: number[] = [];
    const t0 = clock.now();
    const job = scheduler.add({ name: 'deadline', periodMs: 1000, firstDelayMs: 1000, run: async () => void at.push(clock.now() - t0) });
    await clock.advance(100);
    job.wakeAt(t0 + 600);
    job.wakeAt(t0 + 400);
    job.wakeAt(t0 + 900); // later than an ask already made: ignored
    await tick(); // the wait takes the asks into account
    await clock.advance(500);
    expect(at).toEqual([400]);
    await clock.advance(1000);
    expect(at).toEqual([400, 1400]);
    await scheduler.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('reads wakeAt times on its own wake clock while its period runs on the scheduler clock', async () => {
    const periods = new ManualClock();
    const deadlines = new ManualClock(Date.UTC(2040, 0, 1));
    const scheduler = new PeriodicScheduler({ clock: periods, onError: () => undefined });
    let runs = 0;
    const job = scheduler.add({ name: 'dwell', periodMs: 60_000, wakeClock: deadlines, run: async () => void runs++ });
    await periods.advance(1);
    expect(runs).toBe(1);
    job.wakeAt(deadlines.now() + 5_000);
    await periods.advance(10_000); // the period's clock moving does not reach the deadline
    expect(runs).toBe(1);
    await deadlines.advance(5_000);
    expect(runs).toBe(2);
    await scheduler.stop();
    expect(periods.pendingTimers + deadlines.pendingTimers).toBe(0);
  });

  it('runSoon runs a waiting job at once, and a job asked during its run once more right after it, never overlapping', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    let release!: () => void;
    let calls = 0;
    let inFlight = 0;
    let most = 0;
    const job = scheduler.add({
      name: 'soon',
      periodMs: 10_000,
      firstDelayMs: 10_000,
      run: async () => {
        calls++;
        most = Math.max(most, ++inFlight);
        if (calls === 1) await new Promise<void>((r) => (release = r));
        inFlight--;
      },
    });
    job.runSoon();
    await tick();
    expect(calls).toBe(1);
    job.runSoon(); // during the run: one more run once this one ends
    job.runSoon();
    await tick();
    expect(calls).toBe(1);
    release();
    await tick();
    expect(calls).toBe(2);
    expect(most).toBe(1);
    await clock.advance(9_999);
    expect(calls).toBe(2);
    await clock.advance(1);
    expect(calls).toBe(3);
    await scheduler.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('stop ends a wait that a wakeAt time would end', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    let runs = 0;
    const job = scheduler.add({ name: 'late', periodMs: 1000, firstDelayMs: 1000, run: async () => void runs++ });
    job.wakeAt(clock.now() + 500);
    await scheduler.stop();
    await clock.advance(2000);
    expect(runs).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });
});
