/**
 * @module failure/deadline
 * Task deadlines: when a task must be finished, from `engine.start(…, { deadline })` and the
 * workflow's `timeout` (the earlier wins), stored on the task row. A run arms a timer on the
 * engine's clock (so a test's ManualClock moves it): when it fires, the run fails with
 * {@link DeadlineExceededError} and the running step's signal fires with it. A run that starts
 * past the deadline fails at once, and a task parked beyond it is woken at it (see `outcome.ts`).
 */
import { toMs, type Duration } from '../duration.ts';
import { DeadlineExceededError, InvalidArgumentError } from '../errors.ts';

/** The task's deadline in ms, or null; refuses one that is not a time or already past. */
export function taskDeadline(now: number, deadline: Date | number | undefined, timeout: Duration | undefined): number | null {
  let at: number | null = null;
  if (deadline !== undefined) {
    const ms = deadline instanceof Date ? deadline.getTime() : deadline;
    if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new InvalidArgumentError(`deadline must be a Date or a time in ms since the epoch, got ${String(deadline)}.`);
    if (ms <= now) throw new InvalidArgumentError(`deadline ${new Date(ms).toISOString()} is already past (now is ${new Date(now).toISOString()}).`);
    at = ms;
  }
  if (timeout !== undefined) {
    const byTimeout = now + toMs(timeout, 'timeout');
    at = at === null ? byTimeout : Math.min(at, byTimeout);
  }
  return at;
}

/**
 * The deadline a retry writes: the one given, or, when the task's deadline has passed, none (a
 * retried task would otherwise fail again at once). Nothing when the deadline stands.
 */
export function retryDeadline(task: { deadlineAt: number | null }, given: number | null | undefined, now: number): { deadlineAt?: number | null } {
  if (given !== undefined) return { deadlineAt: given };
  if (task.deadlineAt !== null && task.deadlineAt <= now) return { deadlineAt: null };
  return {};
}

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

/** Arms the deadline's timer for the run; the returned function disarms it (at the end of the run). */
export function armDeadline(run: DeadlineRun): () => void {
  if (run.deadline === null) return () => undefined;
  const stop = new AbortController();
  run.deps.clock.sleep(Math.max(0, run.deadline - run.deps.clock.now()), stop.signal).then(
    () => expire(run),
    () => undefined,
  );
  return () => stop.abort(null);
}
