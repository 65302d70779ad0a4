/**
 * @module run/resume
 * Internal: not part of the public API (the package exports only its index modules).
 * A parked run kept in memory. When a run parks (it can only wait: for a signal, a sleep, a
 * deadline), its code is suspended at its waits, and every result it received is durable. The
 * worker may keep that suspended run instead of dropping it; when the same worker claims the
 * task next, the run takes up its code where it stopped, without reading its journal or replaying
 * its code: a chat session's next turn costs the same at turn 300 as at turn 3.
 *
 * Only a claim that follows the park directly may do so: the next epoch after the park's (no
 * other run came between), the task running (not cancelling), with the journal the run parked
 * with (no retry, no re-run's undo, no error written from outside, the same deadline). Anything
 * else, and any run that may not be resumed whole, is replayed from its journal as usual.
 */
import type { ClaimedTask } from '../store.ts';
import type { RunCore } from './core.ts';
import { hasEnded, type RunState } from './state.ts';
import { CODE_RUNNING } from './cleanup-scope.ts';

/**
 * Whether a run that has just parked (`before`: its state when it ended) can be kept to be
 * resumed: it was neither held nor halted, nothing of it is live, every
 * wait settles in-process (no call was refused by a pause or a drain), its signal has not fired,
 * and nothing is left of a replay, a re-run's undo or a cleanup.
 */
export function mayKeep(run: RunCore, before: RunState): boolean {
  return (
    before.kind === 'running' &&
    before.hold === 'none' &&
    run.state.kind === 'running' &&
    run.refused === 0 &&
    run.live === 0 &&
    run.waits.size > 0 &&
    [...run.waits.values()].every((w) => w.rearm !== undefined) &&
    !run.aborted &&
    !run.abandoned &&
    run.undo === null &&
    run.cleanup === CODE_RUNNING &&
    !run.replay.pending
  );
}

/** Whether `claimed` is the claim that directly follows the park of `run` (kept by {@link mayKeep}). */
export function resumesFromPark(run: RunCore, claimed: ClaimedTask, now: number): boolean {
  const before = run.task;
  const task = claimed.task;
  return (
    hasEnded(run.state) &&
    run.state.kind === 'running' &&
    claimed.event === 'claim' &&
    task.id === run.taskId &&
    task.epoch === run.epoch + 1 &&
    task.runs === before.runs + 1 &&
    task.status === 'running' &&
    !task.pauseRequested &&
    task.error === null &&
    task.undoFrom === null &&
    task.retries === before.retries &&
    (task.deadlineAt ?? null) === (before.deadlineAt ?? null) &&
    (run.deadline === null || now < run.deadline)
  );
}
