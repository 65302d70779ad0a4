/**
 * @module store/journal
 * Guarded writes: transitions (the lifecycle's status changes, with their journal rows and log entries) and fenced checkpoints, alone or in batches.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { NewEvent } from './log.ts';
import type { StepRow, TaskPatch, TaskRow } from './rows.ts';
import type { WakeEvent } from './wake.ts';

export type WriteGuard = { version: number } | { epoch: number };

export interface TransitionWrite {
  kind: 'transition';
  taskId: string;
  event: string;
  /** Legal source statuses (from the lifecycle table); the write is refused from any other. */
  from: readonly TaskStatus[];
  to: TaskStatus;
  guard: WriteGuard;
  /** When set, the write is refused unless the task's pause request is in this state. */
  pauseRequested?: boolean;
  set: TaskPatch;
  at: number;
  workerId?: string | null;
  /** JSON text: the transition's detail (also in its log entry). */
  detail?: string | null;
  /**
   * Log entries appended in the same transaction, in order, before the entries the store derives
   * from `steps`, `deleteSteps` and `consume` (see {@link Store}). The first is the transition's own.
   */
  log: readonly NewEvent[];
  /** Journal rows committed in the same transaction (upserted by (taskId, seq)). */
  steps?: readonly StepRow[];
  /** Journal positions deleted in the same transaction (a retry forgets what followed the failure). */
  deleteSteps?: readonly number[];
  /** Signals consumed in the same transaction. */
  consume?: readonly { signalId: number; seq: number }[];
  /** Announced to other processes when (and only if) the write commits. */
  notify?: WakeEvent;
  /**
   * Set when the write finishes a task that has a parent (a child task): in the same transaction,
   * the parent `taskId` receives the signal `name` (its idempotency key too, so a child that ends
   * again after a retry is recorded once), whose payload is `{"status","output","error"}` of the
   * updated row, as `SignalStore.insertSignal` records one: the parent is made due if it waits
   * for it, and workers are woken.
   */
  parentSignal?: { taskId: string; name: string };
  /**
   * `'head'`: the writer needs only the task's head back (see {@link TaskHead}); `'end'`: its head
   * and its outcome (see {@link TaskEnd}), not its whole row. A store may answer with more (the
   * row, or an end for a head) all the same.
   */
  answer?: 'head' | 'end';
}
// When `set.waitEvents` names events, the store also makes the task due at `at` if an unconsumed
// signal of one of those names already exists, so that a signal sent while the task was still
// running cannot be missed.

/** A journal write by the run holding the lease at `epoch`; refused once the epoch moved on. */
export interface StepWrite {
  kind: 'step';
  taskId: string;
  epoch: number;
  step: StepRow;
  consume?: { signalId: number; seq: number };
  /**
   * The writer knows of no journal row at this position (it is past every row the run loaded or
   * has written): a store may insert the row without looking for one to update. Only a hint: if a
   * row is there after all (a retried write whose first attempt committed), the store still
   * updates it, as without the hint.
   */
  fresh?: true;
  /**
   * The write is sent again after an attempt whose answer was lost (a connection that dropped
   * around its commit): that attempt may have committed. A row at the position identical to this
   * one (same epoch, status, attempts, output, times…) is then this write: the store answers it
   * accepted without writing it again, so the log takes no second entry for it and has no gap.
   * A store whose commits always answer (SQLite's, in the process) may ignore it.
   */
  again?: true;
}

export type WriteOp = TransitionWrite | StepWrite;
/**
 * What a transition written with `answer: 'head'` may be answered with: the updated task's
 * lifecycle fields, without its input, output and the rest (a batch of hundreds of ends need not
 * send and parse hundreds of whole rows when nobody in the writing process reads them).
 */
export type TaskHead = Pick<TaskRow, 'id' | 'workflow' | 'status' | 'epoch' | 'leaseOwner' | 'runAt' | 'updatedAt'> & { readonly head: true };

/** What `result()` answers of a finished task: its status, output, error and cancel reason. */
export type TaskOutcome = Pick<TaskRow, 'status' | 'output' | 'error' | 'cancelReason'>;

/**
 * What a transition written with `answer: 'end'` may be answered with: the head and what
 * `result()` answers of a finished task (its output, error and cancel reason), without its input
 * and the rest: a task's end does not send its input back to the worker that ran it.
 */
export type TaskEnd = TaskHead & TaskOutcome & { readonly end: true };

/** Whether a transition's answer is a head (see {@link TaskHead}), with its outcome or not. */
export function isTaskHead(r: TaskRow | TaskHead): r is TaskHead {
  return 'head' in r;
}

/** Whether a transition's answer is a head with its outcome (see {@link TaskEnd}). */
export function isTaskEnd(r: TaskRow | TaskHead): r is TaskEnd {
  return 'end' in r;
}

/** For a transition: the updated row (or its head, or its end), or `null` if its guard failed; for a step: accepted or not. */
export type WriteResult = TaskRow | TaskHead | TaskEnd | null | boolean;

/** Transitions and checkpoints. */
export interface JournalStore {
  /**
   * One guarded transition (see {@link TransitionWrite}). Returns the row as it is after the whole
   * write, including the waitEvents rule (a waiting task made due by an earlier signal).
   */
  transition(write: TransitionWrite): Promise<TaskRow | null>;
  /**
   * Many fenced writes; each op is guarded on its own. A store may commit a batch in parts (the
   * PostgreSQL store's step statement autocommits before its transitions run): one that fails
   * after a part committed marks the error it throws with that part's results
   * ({@link markCommitted}), so that a retry writes only the rest. Writing a committed op again
   * would not apply it twice, but a step result written again moves its log entry to a new seq.
   */
  writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]>;
  /**
   * `writeBatch`, done before returning: offered by a store on a synchronous driver (SQLite), so
   * that a lone run's checkpoint costs no promise round of its own. Same results, same errors.
   */
  writeBatchNow?(ops: readonly WriteOp[]): WriteResult[];
}

const COMMITTED = Symbol.for('stepwise.batch.committed');

/** Marks `error` with the results of the ops of a batch (by index) that committed before it failed. */
export function markCommitted(error: unknown, committed: ReadonlyMap<number, WriteResult>): unknown {
  if (committed.size && typeof error === 'object' && error !== null) Object.defineProperty(error, COMMITTED, { value: committed, configurable: true });
  return error;
}

/** The results of the ops that committed before a `writeBatch` failed with `error` (see {@link markCommitted}). */
export function committedOf(error: unknown): ReadonlyMap<number, WriteResult> | undefined {
  return typeof error === 'object' && error !== null ? ((error as Record<symbol, unknown>)[COMMITTED] as ReadonlyMap<number, WriteResult> | undefined) : undefined;
}
