/**
 * @module run/failed-outside
 * Internal: not part of the public API (the package exports only its index modules).
 * A task failed from outside a run while its last run had left compensations to run: the dwell
 * scanner's `expire` of a waiting or paused task (see `lifecycle.ts`). The scanner writes the
 * failure on the task (`error`, which no other status than `failed` carries: a retry clears it) and
 * makes the task due; the run that claims it fails at its start with that error, as a run past its
 * deadline does. Its code replays what it recorded (registering the compensations of the steps it
 * completed) and makes no new call, the compensations run, and the task ends `failed` with the
 * scanner's error (or a COMPENSATION_FAILED error naming it).
 */
import { decodeError, deserializeError } from '../serialize.ts';
import type { TaskRow } from '../store.ts';

/** What a run needs to carry out a failure decided outside it. */
export interface FailedOutsideRun {
  readonly task: Pick<TaskRow, 'error'>;
  fail(error: Error): Error;
  abortRun(reason: unknown): void;
}

/** Fails the run (and fires its signal) now, returning true, when its task was failed from outside. */
export function failedOutside(run: FailedOutsideRun): boolean {
  if (run.task.error === null) return false;
  const error = deserializeError(decodeError(run.task.error));
  run.fail(error);
  run.abortRun(error);
  return true;
}
