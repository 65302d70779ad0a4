/**
 * @module failure/deadline
 * Task deadlines: when a task must be finished, from `engine.start(…, { deadline })` and the
 * workflow's `timeout` (the earlier wins), stored on the task row. A run enforces it (see
 * `run/deadline.ts`).
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';

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
