import { describe, expect, it } from 'vitest';
import { PeriodicScheduler } from '../src/worker/periodic.ts';
import { ManualClock } from '../src/testing/manual-clock.ts';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('the scheduler of periodic jobs', () => {
  it('runs a job every period on the injected clock, after its first delay', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    const at: number[] = [];
    const t0 = clock.now();
    scheduler.add({ name: 'count', periodMs: 100, firstDelayMs: 30, run: async () => void at.push(clock.now() - t0) });
    await clock.advance(329);
    expect(at).toEqual([30, 130, 230]);
    await scheduler.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('adds jitter to each wait', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined, random: () => 0.5 });
    const at: number[] = [];
    const t0 = clock.now();
    scheduler.add({ name: 'spread', periodMs: 100, jitterMs: 20, run: async () => void at.push(clock.now() - t0) });
    await clock.advance(250);
    expect(at).toEqual([10, 120, 230]);
    await scheduler.stop();
  });

  it('reports a job that throws and keeps scheduling it', async () => {
    const clock = new ManualClock();
    const errors: string[] = [];
    const scheduler = new PeriodicScheduler({ clock, onError: (e, job) => errors.push(`${job.name}: ${(e as Error).message}`) });
    let calls = 0;
    scheduler.add({
      name: 'flaky',
      periodMs: 10,
      firstDelayMs: 5,
      run: async () => {
        calls++;
        throw new Error(`boom ${calls}`);
      },
    });
    await clock.advance(25);
    expect(calls).toBe(3);
    expect(errors).toEqual(['flaky: boom 1', 'flaky: boom 2', 'flaky: boom 3']);
    await scheduler.stop();
  });

  it('never overlaps a job with itself, and stop waits for the run in flight', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    let ended = false;
    scheduler.add({
      name: 'slow',
      periodMs: 10,
      run: async () => {
        calls++;
        most = Math.max(most, ++inFlight);
        await gate;
        inFlight--;
        ended = true;
      },
    });
    await clock.advance(100); // ten periods pass while the first run holds
    expect(calls).toBe(1);
    let stopped = false;
    const stopping = scheduler.stop().then(() => (stopped = true));
    await tick();
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(ended).toBe(true);
    expect(most).toBe(1);
    expect(calls).toBe(1);
  });

  it("ends a job's schedule when its run resolves 'stop'", async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    let calls = 0;
    scheduler.add({ name: 'once', periodMs: 10, run: async () => (++calls, 'stop') });
    await clock.advance(50);
    expect(calls).toBe(1);
    await scheduler.stop();
  });
});

describe('a job that asks to run earlier than its period', () => {
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
    await clock.advance(2300);
    expect(at).toEqual([0, 250, 1250, 2250]);
    await scheduler.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('wakes a job that is waiting when it asks for an earlier time, and keeps the earliest of several asks', async () => {
    const clock = new ManualClock();
    const scheduler = new PeriodicScheduler({ clock, onError: () => undefined });
    const at: number[] = [];
    const t0 = clock.now();
    const job = scheduler.add({ name: 'deadline', periodMs: 1000, firstDelayMs: 1000, run: async () => void at.push(clock.now() - t0) });
    await clock.advance(100);
    job.wakeAt(t0 + 600);
    job.wakeAt(t0 + 400);
    job.wakeAt(t0 + 900); // later than an ask already made: ignored
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
    job.runSoon(); // during the run: it runs again once this one ends
    job.runSoon();
    await tick();
    expect(calls).toBe(1);
    release();
    await tick();
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

  it('stop ends a wait that only a wakeAt time would end', async () => {
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
