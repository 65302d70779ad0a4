import { describe, expect, it } from 'vitest';
import { PeriodicScheduler } from '../src/worker/periodic.ts';
import { ManualClock } from '../src/manual-clock.ts';

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
