/**
 * @module replay/process-clock
 * The clock of a simulated worker process (a replay's, or a crash trial's): it reads a manual clock
 * and goes silent with its process, so that a dead process's timers never fire.
 */
import type { Clock } from '../clock.ts';

/** `clock`, as a process that is alive while `alive()` holds sees it. */
export function processClock(clock: Clock, alive: () => boolean): Clock {
  const never = (): Promise<void> => new Promise<void>(() => undefined);
  return {
    now: () => clock.now(),
    sleep: (ms, signal) => (alive() ? clock.sleep(ms, signal).then(() => (alive() ? undefined : never())) : never()),
  };
}
