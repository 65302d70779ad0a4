/**
 * @module run/deadline
 * Internal: not part of the public API (the package exports only its index modules).
 * A run enforces its task's deadline (set at start: see `failure/deadline.ts`): it arms a timer on
 * the engine's clock (so a test's ManualClock moves it): when it fires, the run fails with
 * {@link DeadlineExceededError} and the running step's signal fires with it. A run that starts
 * past the deadline fails at once, and a task parked beyond it is woken at it (see `outcome.ts`).
 */
import { DeadlineExceededError } from '../errors.ts';

/** What a run needs of its clock and its state to enforce a deadline. */
export interface DeadlineRun {
  readonly taskId: string;
  readonly deadline: number | null;
  readonly deps: { readonly clock: { now(): number; sleep(ms: number, signal?: AbortSignal): Promise<void> } };
  fail(error: Error): Error;
  abortRun(reason: unknown): void;
}

/** Fails the run (and fires its signal) now, returning true, when its deadline has passed. */
export function deadlinePassed(run: DeadlineRun): boolean {
  if (run.deadline === null || run.deps.clock.now() < run.deadline) return false;
  expire(run);
  return true;
}

function expire(run: DeadlineRun): void {
  const error = new DeadlineExceededError(run.taskId, run.deadline as number);
  run.fail(error);
  run.abortRun(error);
}

/** What disarms no timer: a run without a deadline holds this one function, not one of its own. */
export function disarmed(): void {}

/** Arms the deadline's timer for the run; the returned function disarms it (at the end of the run). */
export function armDeadline(run: DeadlineRun): () => void {
  if (run.deadline === null) return disarmed;
  const stop = new AbortController();
  run.deps.clock.sleep(Math.max(0, run.deadline - run.deps.clock.now()), stop.signal).then(
    () => expire(run),
    () => undefined,
  );
  return () => stop.abort(null);
}
