/**
 * @module run/waits
 * Internal: not part of the public API (the package exports only its index modules).
 * Waits (a long sleep or retry backoff, an event) are registered, not thrown. A wait with a
 * deadline also runs a timer in-process, so it ends on time while other work goes on; when the run
 * has nothing left to do but wait, it parks with all of its waits (the earliest deadline, every
 * awaited event: see `outcome.ts`).
 */
import { parked, scheduleIdleCheck, type Activity } from './activity.ts';
import { coreOf } from './core.ts';
import type { Run } from './run.ts';
import type { Wait } from './outcome.ts';

export type { Wait } from './outcome.ts';
import { haltReason } from './state.ts';

/**
 * Registers a wait on which the task may park. With `timer`, a wait that has a deadline also
 * ends in-process when the deadline comes while the run is still going (other work is live);
 * the promise then resolves and the caller goes on. Otherwise it does not settle in this run.
 */
export function waitFor(view: Run, wait: Wait, activity: Activity, timer = true): Promise<void> {
  const run = coreOf(view);
  run.setWait(wait);
  activity.idle();
  if (!timer) return parked<void>(run);
  const { clock } = run.deps;
  return new Promise<void>((resolve) => {
    const end = (): void => {
      if (run.ended || run.waits.get(wait.row.seq) !== wait) return;
      run.deleteWait(wait.row.seq);
      activity.busy();
      resolve();
    };
    // An event wait ends early when its signal arrives while the run goes on.
    if (wait.events.length) wait.wake = end;
    const arm = (): void => {
      if (wait.wakeAt === null) {
        scheduleIdleCheck(run);
        return;
      }
      clock.sleep(Math.max(0, wait.wakeAt - clock.now()), (run.waitTimers ??= new AbortController()).signal).then(end, () => undefined);
    };
    // A resumed run's wait whose deadline has passed ends at once (a clock's timer of no length
    // may wait for the clock to move).
    wait.rearm = () => (wait.wakeAt !== null && wait.wakeAt <= clock.now() ? end() : arm());
    arm();
  });
}

/** A short wait in-process; a long one is registered (it may park the task). Resolves when due. */
export async function pauseUntil(view: Run, wakeAt: number, wait: Wait, activity: Activity): Promise<void> {
  const run = coreOf(view);
  const remaining = wakeAt - run.deps.clock.now();
  if (remaining <= 0) return;
  if (remaining > run.deps.parkAfterMs) return waitFor(run, wait, activity);
  try {
    await run.deps.clock.sleep(remaining, run.signal);
  } catch {
    throw haltReason(run.state);
  }
}

/** Stops a call that may not go on now (pause, drain): its row is kept for the next run. */
export function holdFor(view: Run, wait: Wait, activity: Activity): Promise<never> {
  const run = coreOf(view);
  run.refused++;
  return waitFor(run, wait, activity, false) as Promise<never>;
}
