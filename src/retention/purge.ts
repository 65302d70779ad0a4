/**
 * @module retention/purge
 * Deleting finished tasks: `engine.delete(id)` (one task), `engine.purge({ olderThan })` (every
 * task finished that long ago) and the workers' retention sweep (each workflow's policy). All three
 * go through `Store.deleteTasks`, which takes a task with everything it owns in one transaction
 * and passes over a task another transaction holds; each batch deleted is reported to observers
 * (`onTasksDeleted`), since a deleted task leaves no log of its own. The report is durable: the
 * deletion writes a record of each task in its transaction, removed once reported, and the records
 * of a process that died before its report are reported by another (at least once).
 *
 * Deleting a task frees its idempotency key (a start with that key creates a new task) and makes
 * its id unknown (TASK_NOT_FOUND). Idempotency records of business keys have their own time to
 * live and are not deleted with the task that wrote them.
 */
import { toMs, type Duration } from '../duration.ts';
import { ConcurrentUpdateError, ConflictError, InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import { notify, type Observer } from '../observers.ts';
import { isFinished } from '../lifecycle.ts';
import type { Clock } from '../clock.ts';
import type { DeletedTask, Store, TaskSelection, TaskRow } from '../store.ts';
import type { Actor } from '../task-events.ts';
import type { TasksDeletedEvent } from '../task-events/observed.ts';
import { DELETABLE_STATUSES, deletableStatuses, olderThan, type DeletableStatus } from './policy.ts';
import { faultPoint } from '../fault-points.ts';

/** Tasks deleted per statement. */
const BATCH = 1000;

export interface PurgeOptions {
  /** Tasks that finished at least this long ago (`0`: every finished task). */
  olderThan: Duration;
  /** Only tasks in these final statuses. @defaultValue ['succeeded', 'failed', 'cancelled'] */
  status?: DeletableStatus | readonly DeletableStatus[];
  /** Only tasks of these workflows. @defaultValue every workflow */
  workflow?: string | readonly string[];
  /** Count what would be deleted; delete nothing. @defaultValue false */
  dryRun?: boolean;
  /** Delete at most this many. @defaultValue no limit */
  limit?: number;
}

export interface PurgeResult {
  /** Tasks deleted (with `dryRun`, that would be deleted now). */
  count: number;
  byStatus: Record<DeletableStatus, number>;
  dryRun: boolean;
}

export type { TasksDeletedEvent } from '../task-events/observed.ts';

export interface PurgeDeps {
  store: Store;
  clock: Clock;
  observers: readonly Observer[];
}

/**
 * How long the process that deleted tasks has to report them before another process may (it died
 * between its commit and its report): records older than that are reported by the next process
 * that looks (see {@link reportPendingDeletions}).
 */
export const DELETION_REPORT_MS = 60_000;
/** Deletion records reported per batch by {@link reportPendingDeletions}. */
const REPORT_BATCH = 500;

function hearsDeletions(deps: PurgeDeps): boolean {
  return deps.observers.some((o) => typeof o.onTasksDeleted === 'function');
}

/**
 * Deletes up to `limit` tasks of `selection` and reports them to observers (`onTasksDeleted`). The
 * store writes a deletion record of each task in the deletion's transaction; the record is removed
 * once the report is made. A process that dies in between leaves the records, and another process
 * reports them (see {@link reportPendingDeletions}): a deletion is reported at least once.
 */
async function deleteReported(deps: PurgeDeps, selection: TaskSelection, limit: number, reason: TasksDeletedEvent['reason'], by: Actor): Promise<DeletedTask[]> {
  const at = deps.clock.now();
  const tasks = await deps.store.deleteTasks(selection, limit, { reason, by, at, deliverAfter: at + DELETION_REPORT_MS });
  faultPoint('retention:deleted');
  if (!tasks.length) return tasks;
  notify(deps.observers, 'onTasksDeleted', { tasks, reason, by, at });
  await deps.store.ackDeletions?.(tasks.map((t) => t.id));
  return tasks;
}

/**
 * Reports to this process's observers the deletions whose process did not (it died between its
 * commit and its report, or heard no deletions): the records due, claimed for
 * {@link DELETION_REPORT_MS} each, grouped as they were deleted. Returns how many tasks it reported.
 * Called by every deletion (`engine.delete`, `engine.purge`, a worker's sweep) and by the workers'
 * periodic job; does nothing in a process with no `onTasksDeleted` observer.
 */
export async function reportPendingDeletions(deps: PurgeDeps): Promise<number> {
  if (!hearsDeletions(deps) || !deps.store.claimDeletions) return 0;
  let count = 0;
  for (;;) {
    const records = await deps.store.claimDeletions(deps.clock.now(), DELETION_REPORT_MS, REPORT_BATCH);
    const groups = new Map<string, TasksDeletedEvent>();
    for (const r of records) {
      const key = JSON.stringify([r.reason, r.by.kind, r.by.id, r.at]);
      const group = groups.get(key) ?? { tasks: [], reason: r.reason, by: r.by, at: r.at };
      group.tasks.push({ id: r.id, workflow: r.workflow, status: r.status });
      groups.set(key, group);
    }
    for (const event of groups.values()) notify(deps.observers, 'onTasksDeleted', event);
    if (records.length) await deps.store.ackDeletions?.(records.map((r) => r.id));
    count += records.length;
    if (records.length < REPORT_BATCH) return count;
  }
}

const none = (): Record<DeletableStatus, number> => ({ succeeded: 0, failed: 0, cancelled: 0 });

/** `engine.purge`: every finished task `olderThan` ago (of the statuses and workflows given). */
export async function purgeTasks(deps: PurgeDeps, options: PurgeOptions, by: Actor): Promise<PurgeResult> {
  if (typeof options !== 'object' || options === null || options.olderThan === undefined) {
    throw new InvalidArgumentError("purge({ olderThan }): say how long ago the tasks to delete must have finished ('30d'; 0 for every finished task).");
  }
  const keepMs = toMs(options.olderThan, 'purge({ olderThan })');
  const statuses = deletableStatuses(options.status, 'purge({ status })');
  const workflows = options.workflow === undefined ? undefined : Array.isArray(options.workflow) ? [...(options.workflow as string[])] : [options.workflow as string];
  if (workflows && (!workflows.length || workflows.some((w) => typeof w !== 'string' || !w))) {
    throw new InvalidArgumentError('purge({ workflow }): a workflow name, or a non-empty list of them.');
  }
  const limit = options.limit ?? Infinity;
  if (limit !== Infinity && (!Number.isSafeInteger(limit) || limit < 1)) throw new InvalidArgumentError(`purge({ limit }) must be a whole number ≥ 1, got ${String(options.limit)}.`);
  const deletion = olderThan(deps.clock.now(), keepMs, statuses, workflows);
  const byStatus = none();
  if (options.dryRun === true) {
    const counts = await deps.store.countTasks(deletion);
    for (const s of DELETABLE_STATUSES) byStatus[s] = counts[s] ?? 0;
    const total = byStatus.succeeded + byStatus.failed + byStatus.cancelled;
    return { count: Math.min(total, limit), byStatus, dryRun: true };
  }
  await reportPendingDeletions(deps);
  let count = 0;
  while (count < limit) {
    const batch = Math.min(BATCH, limit - count);
    const gone = await deleteReported(deps, deletion, batch, 'purge', by);
    for (const t of gone) byStatus[t.status as DeletableStatus]++;
    count += gone.length;
    if (gone.length < batch) break;
  }
  return { count, byStatus, dryRun: false };
}

/**
 * `engine.delete`: one finished task. A task that is not finished is a CONFLICT (cancel it first);
 * one that another transaction holds is tried again a few times.
 */
export async function deleteTask(deps: PurgeDeps, id: string, by: Actor): Promise<TaskRow> {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A task id is required.');
  for (let attempt = 0; attempt < 20; attempt++) {
    const row = await deps.store.getTask(id);
    if (!row) throw new TaskNotFoundError(id);
    if (!isFinished(row.status)) {
      throw new ConflictError(`Task ${id} is ${row.status}: only a finished task (succeeded, failed or cancelled) can be deleted. Cancel it first, or wait for it to finish.`);
    }
    const gone = await deleteReported(deps, { ids: [id], statuses: DELETABLE_STATUSES }, 1, 'delete', by);
    if (gone.length) return row;
    // Held by another transaction at that moment (a signal, a retry): look again.
    await new Promise((r) => setTimeout(r, 5 * (attempt + 1)));
  }
  throw new ConcurrentUpdateError(id);
}

/**
 * One call of a retention sweep: deletes up to `limit` tasks across `deletions` (see
 * `sweepDeletions`), in order; returns how many it deleted.
 */
export async function sweepOnce(deps: PurgeDeps, deletions: readonly TaskSelection[], limit: number, by: Actor): Promise<number> {
  let count = 0;
  for (const deletion of deletions) {
    if (count >= limit) break;
    count += (await deleteReported(deps, deletion, limit - count, 'retention', by)).length;
  }
  return count;
}
