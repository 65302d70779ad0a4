/**
 * @module store-sql/guards
 * Internal: not part of the public API.
 * The checks both stores make on rows read under lock before a guarded write, written once: the
 * guards of an approval update, and the refusal of a signal its task does not await.
 */
import { LEASED_STATUSES, type TaskStatus } from '../lifecycle.ts';
import { decodeEvents } from '../task-columns.ts';
import type { ApprovalUpdate, SignalInsert, SignalWrite } from '../store.ts';

/** Whether an approval update may be made: the record's version, and the task's status and epoch, as the update requires. */
export function approvalGuardPasses(w: ApprovalUpdate, version: number, task: { status: TaskStatus; epoch: number }): boolean {
  if (version !== w.version) return false;
  if (w.taskStatuses && !w.taskStatuses.includes(task.status)) return false;
  return w.epoch === undefined || (task.epoch === w.epoch && LEASED_STATUSES.includes(task.status));
}

/** With `onlyIfAwaited`, the refusal of a signal the task (in `status`, awaiting `waitEvents`) does not wait for; else `null`. */
export function notAwaited(s: SignalWrite, status: TaskStatus, waitEvents: string | null): SignalInsert | null {
  if (!s.onlyIfAwaited || (status === 'waiting' && waitEvents?.includes(`|${s.name}|`))) return null;
  return { created: false, refused: { status, waitEvents: decodeEvents(waitEvents) ?? [] } };
}
