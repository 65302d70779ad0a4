/**
 * @module run/activity
 * Internal: not part of the public API (the package exports only its index modules).
 * Live activity and idleness. Every call the code makes is counted as live work while it runs
 * (an attempt, a checkpoint, an in-process sleep, a result waiting for its turn) and stops counting
 * when it turns into a wait that may outlast the run. When nothing is live and the code is quiet,
 * the run ends: it can only wait, or it was asked to stop starting work.
 *
 * Workflow code should await only `ctx` calls (and promises built from them); other I/O belongs
 * in steps. The run decides it can only wait after the code has been quiet for a moment.
 */
import { coreOf, type RunCore } from './core.ts';
import type { Run } from './run.ts';
import { diverged } from './identity.ts';
import { fatalOf, haltOf } from './state.ts';
import { inScope } from './cleanup-scope.ts';

/** How long the code must stay quiet before the run decides it can only wait. */
const QUIET_MS = 10;

/** Live-activity accounting of one call: `idle()` while it only waits, `busy()` when it resumes. */
export interface Activity {
  idle(): void;
  busy(): void;
}

/**
 * Runs `work(run, arg, activity)` counted as live activity until it settles or calls `idle()`
 * (when it turns into a wait that may outlast the run); then checks whether the run can only wait.
 */
export function track<A, T>(run: RunCore, work: (run: RunCore, arg: A, activity: Activity) => Promise<T>, arg: A): Promise<T> {
  run.live++;
  const activity: CallActivity = { run, counted: true, idle: activityIdle, busy: activityBusy };
  let p: Promise<T>;
  try {
    p = work(run, arg, activity);
  } catch (e) {
    p = Promise.reject(e);
  }
  const idle = activityIdle.bind(activity);
  p.then(idle, idle);
  return p;
}

/**
 * One tracked call's activity (see {@link track}). An object literal whose methods are functions
 * of the module: no closure per call, and a shape V8 keeps while `track` lives (the shape of a
 * class's instances is dropped once none is alive, and code depending on it with it: see
 * resolvers.ts).
 */
interface CallActivity extends Activity {
  readonly run: RunCore;
  counted: boolean;
}

function activityIdle(this: CallActivity): void {
  if (!this.counted) return;
  this.counted = false;
  const run = this.run;
  run.live--;
  run.changed();
  scheduleIdleCheck(run);
}

function activityBusy(this: CallActivity): void {
  if (this.counted) return;
  this.counted = true;
  this.run.live++;
}

/**
 * Ends the run when it can only wait: nothing live, and the code quiet (after its continuations
 * and a short pause, so that a plain `await` in workflow code is not mistaken for idleness).
 */
export function scheduleIdleCheck(run: RunCore): void {
  if (run.idleCheckScheduled || run.ended) return;
  // Only a run that waits, was asked to stop starting work, or holds results for the replay can
  // end before its code returns; the common case (a run busy with its steps) checks nothing.
  if (!run.waits.size && run.state.hold === 'none' && !run.refused && !run.gated) return;
  // Work other than results held for the replay is live: the run is not quiet, and that work
  // checks again when it stops being live (an activity's `idle`, a result's hand-over).
  if (run.live > run.gated) return;
  run.idleCheckScheduled = true;
  const quietSince = run.activity;
  setImmediate(() => {
    if (!quiet(run)) {
      run.idleCheckScheduled = false;
      return;
    }
    setTimeout(() => {
      run.idleCheckScheduled = false;
      if (!quiet(run) || run.activity !== quietSince) {
        if (!run.ended) scheduleIdleCheck(run);
        return;
      }
      onQuiet(run);
    }, QUIET_MS).unref?.();
  });
}

/** Nothing runs but results waiting for the replay, and no replay turn is pending. */
function quiet(run: RunCore): boolean {
  return !run.ended && run.live === run.gated && !run.replay.scheduled;
}

function onQuiet(run: RunCore): void {
  const next = run.replay.expected();
  const stopping = run.state.hold !== 'none' || run.refused > 0;
  // During the cleanup scope the code makes no call any more: a cleanup call that waits is no divergence.
  if (next && !stopping && !inScope(run.cleanup) && (run.waits.size || run.gated)) {
    // The code only waits, yet the journal says it made another call next.
    diverged(run, next, `the code waits, but the journal says it called ${next.kind} "${next.name}" (position ${next.seq}) next when the task first ran.`);
    return;
  }
  if (run.live > 0) return; // results still waiting for the replay (the stall watchdog covers it)
  if (run.waits.size || stopping) run.signalIdle();
}

/** A promise that does not settle in this run (the call resumes in a later run). */
export function parked<T>(view: Run): Promise<T> {
  const run = coreOf(view);
  scheduleIdleCheck(run);
  return new Promise<T>(() => undefined);
}

/** What a call gets when it may not start: a rejection if failed or halted, else it waits for a later run. */
export function notNow<T>(run: RunCore): Promise<T> {
  const refusal = fatalOf(run.state) ?? haltOf(run.state);
  if (refusal) return Promise.reject(refusal);
  run.refused++;
  return parked<T>(run);
}
