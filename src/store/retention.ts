/**
 * @module store/retention
 * Deleting finished tasks and counting tasks by the same selection (see `src/retention/`).
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { ActorKind } from './log.ts';

/**
 * Tasks a deletion takes or a count counts (see `Store.deleteTasks`, `Store.countTasks`): those in
 * one of `statuses` (a deletion is passed finished ones only) that meet every other condition given.
 */
export interface TaskSelection {
  statuses: readonly TaskStatus[];
  /** Only these tasks. */
  ids?: readonly string[];
  /** Only tasks that finished before this time. */
  finishedBefore?: number;
  /**
   * Only tasks whose id sorts below this one. Ids begin with their creation time, so this bounds
   * the scan to tasks created before a time (a task finishes after it was created).
   */
  idBefore?: string;
  /** Only tasks whose id sorts at or above this one (created at or after a time: see `idBefore`). */
  idAfter?: string;
  /** Only tasks of these workflows. */
  workflows?: readonly string[];
  /** Only tasks due by this time (`run_at` at or before it). */
  dueBy?: number;
  /** Only tasks whose workflow version is none of these. */
  notVersions?: readonly string[];
}

/** A task a deletion removed. */
export interface DeletedTask {
  id: string;
  workflow: string;
  status: TaskStatus;
}

/**
 * What a deletion records with each task it deletes, in the same transaction: how it is reported to
 * observers (`onTasksDeleted`). The record stays until the report is made (`ackDeletions`); until
 * `deliverAfter` only the deleting process reports it, after that any process may (it died first).
 */
export interface DeletionNote {
  reason: 'delete' | 'purge' | 'retention';
  by: { kind: ActorKind; id: string };
  at: number;
  deliverAfter: number;
}

/** A deletion record not yet reported: the task deleted and its deletion's note. */
export interface DeletionRecord extends DeletedTask {
  reason: DeletionNote['reason'];
  by: { kind: ActorKind; id: string };
  at: number;
}

/** Deletion and counts of tasks. */
export interface RetentionStore {
  /**
   * Deletes up to `limit` tasks that `deletion` selects, oldest id first, each with everything it
   * owns (journal, log, signals, approvals, stream chunks), in one transaction. A task that another
   * transaction holds at that moment (a command, a signal, a decision) is passed over: the next
   * deletion takes it if it still qualifies. Returns the tasks deleted. With `note`, a deletion
   * record of each is written in the same transaction (see {@link DeletionNote}).
   */
  deleteTasks(deletion: TaskSelection, limit: number, note?: DeletionNote): Promise<DeletedTask[]>;
  /**
   * Deletion records due for a report (`deliverAfter` passed, oldest first, up to `limit`), each
   * claimed for `leaseMs` (its `deliverAfter` moves to `now + leaseMs`) so that one process reports it.
   */
  claimDeletions?(now: number, leaseMs: number, limit: number): Promise<DeletionRecord[]>;
  /** The deletion records of these tasks are reported: they are removed. */
  ackDeletions?(taskIds: readonly string[]): Promise<void>;
  /**
   * How many tasks `selection` selects now, by status (statuses with none are left out); with
   * `cap`, each status is counted up to `cap` only (work bounded by it, whatever the table's size).
   */
  countTasks(selection: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>>;
}
