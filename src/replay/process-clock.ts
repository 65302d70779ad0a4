/**
 * @module replay/process-clock
 * A simulated worker process (a replay's, or a crash trial's): its clock, which reads a manual
 * clock and goes silent with its process (a dead process's timers never fire), and how its worker
 * runs.
 */
import type { Clock } from '../clock.ts';
import type { WorkerOptions } from '../worker.ts';

/** The worker of a simulated process: every wait parks, fast polls, no background sweeps. */
export const SIMULATED_WORKER: WorkerOptions = {
  parkAfterMs: 0,
  pollIntervalMs: 5,
  // A replay that waits this long for the call its journal says comes next has diverged.
  replayStallMs: 2000,
  // Stopping a worker with a task still running happens only after a run ran out of time.
  shutdownGraceMs: 100,
  idempotencyPurgeMs: 0,
  retentionSweepMs: 0,
};

/** `clock`, as a process that is alive while `alive()` holds sees it. */
export function processClock(clock: Clock, alive: () => boolean): Clock {
  const never = (): Promise<void> => new Promise<void>(() => undefined);
  return {
    now: () => clock.now(),
    sleep: (ms, signal) => (alive() ? clock.sleep(ms, signal).then(() => (alive() ? undefined : never())) : never()),
  };
}
