/**
 * @module store/approvals
 * Approval records (see `src/approvals/`): their rows, creation, guarded updates and queries.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { NewEvent } from './log.ts';
import type { WakeEvent } from './wake.ts';

/** The status of an approval record (see `src/approvals/`). */
export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'escalated';

/**
 * One approval a task asked for, as stored. JSON columns (`approvers`, `payload`, `policy`,
 * `decisions`, `outcome`) travel as text; the store never parses them, except `approvers` for the
 * approver filter of {@link ApprovalQuery}.
 */
export interface ApprovalRow {
  id: string;
  taskId: string;
  workflow: string;
  name: string;
  /** The call that asked for it, unique per task: a resumed run finds its approval by it. */
  callKey: string;
  status: ApprovalStatus;
  /** JSON array of names. */
  approvers: string;
  quorum: number;
  payload: string | null;
  policy: string;
  deadline: number | null;
  remindAt: number | null;
  level: number;
  /** JSON array of the decisions made. */
  decisions: string;
  /** JSON of the outcome handed to the workflow, once decided. */
  outcome: string | null;
  /** Bumped by every update (compare-and-set). */
  version: number;
  createdAt: number;
  decidedAt: number | null;
}

/**
 * A run creates an approval: inserted unless the task already has one with the same `callKey`
 * (then that one is returned, `created: false`), and only while the task is leased at `epoch`.
 * `log` is appended to the task's log only when the row is created.
 */
export interface ApprovalInsert {
  approval: ApprovalRow;
  epoch: number;
  at: number;
  log: readonly NewEvent[];
}

/** The columns an approval update may set; absent keys are left alone. */
export type ApprovalPatch = Partial<Pick<ApprovalRow, 'status' | 'approvers' | 'deadline' | 'remindAt' | 'level' | 'decisions' | 'outcome' | 'decidedAt'>>;

/**
 * A guarded change of an approval: refused (`null`) unless its `version` is still `version`, and,
 * when given, unless its task is in one of `taskStatuses` and/or leased at `epoch`. In the same
 * transaction: `log` appended to the task's log; with `wake`, a signal of that name recorded once
 * (its idempotency key is `wake.key`) and the task made due if it waits for that name; `notify`
 * announced if the write commits.
 */
export interface ApprovalUpdate extends ApprovalChange {
  id: string;
  version: number;
  at: number;
  taskStatuses?: readonly TaskStatus[];
  epoch?: number;
  /**
   * A change judged in the transaction, once the guards passed: called with the approval as it is
   * and the time by the store's clock (the later of `at` and the database's clock; SQLite's clock
   * is `at`), it returns the change to make instead of `set`, `log`, `wake` and `notify`, or `null`
   * for none (the update then returns the row as it is, version unchanged). A decision uses it to
   * apply a passed deadline first. It must not do I/O; what it throws aborts the transaction.
   */
  plan?: (row: ApprovalRow, now: number) => ApprovalChange | null;
}

/** What an approval update writes: the columns, the log entries, the wake-up signal and announcement. */
export interface ApprovalChange {
  set: ApprovalPatch;
  log: readonly NewEvent[];
  wake?: { name: string; key: string };
  notify?: WakeEvent;
}

/** Approvals by task, status, listed approver or workflow; oldest first. */
export interface ApprovalQuery {
  taskId?: string;
  statuses?: readonly ApprovalStatus[];
  approver?: string;
  /** With `approver`: approvals listing one of these roles (`role:<role>`) count as theirs too. */
  approverRoles?: readonly string[];
  workflow?: string;
  /** Only approvals whose task is in one of these statuses. */
  taskStatuses?: readonly TaskStatus[];
  /** Open approvals (`pending`, `escalated`) only while their task is in one of these statuses; settled ones always. */
  openOnlyFor?: readonly TaskStatus[];
  limit: number;
}

/** Approval records. */
export interface ApprovalStore {
  /** Creates a run's approval (see {@link ApprovalInsert}); `null` if the task is not leased at the epoch. */
  insertApproval(write: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null>;
  getApproval(id: string): Promise<ApprovalRow | null>;
  listApprovals(query: ApprovalQuery): Promise<ApprovalRow[]>;
  /** A guarded change of an approval (see {@link ApprovalUpdate}): the row after it, or `null` if refused. */
  updateApproval(write: ApprovalUpdate): Promise<ApprovalRow | null>;
}
