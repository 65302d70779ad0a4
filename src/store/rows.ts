/**
 * @module store/rows
 * The rows of a task and its journal and signals, as the stores hand them to the engine.
 */
import type { TaskStatus } from '../lifecycle.ts';

export interface TaskRow {
  id: string;
  workflow: string;
  workflowVersion: string;
  status: TaskStatus;
  /** JSON text; `null` stands for `undefined`. */
  input: string | null;
  output: string | null;
  /** JSON of a SerializedError. */
  error: string | null;
  idempotencyKey: string | null;
  /** When a pending or waiting task becomes due (ms since epoch); `null`: not by time. */
  runAt: number | null;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  /** Fencing epoch: bumped by every claim; every worker write must quote it. */
  epoch: number;
  /** Row version for compare-and-set by commands. */
  version: number;
  /** Runs so far (claims, including reclaims after a lost worker). */
  runs: number;
  /** User retries of a failed task so far. */
  retries: number;
  pauseRequested: boolean;
  /** What a waiting task waits for (JSON), for `explain` and the CLI. */
  wait: string | null;
  /** The events a waiting task waits for; a matching signal makes it due at once. */
  waitEvents: string[] | null;
  cancelReason: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  /** The last progress a running step reported (JSON), or null. */
  progress: string | null;
  /** Model usage so far, the calls in flight and the task's budget (JSON, see `src/ai/usage.ts`), or null. */
  usage: string | null;
  /** When the task must be finished (ms), or null: a run past it fails the task (DEADLINE_EXCEEDED). */
  deadlineAt: number | null;
  /**
   * The last run ended, unfinished, with cleanup registered (`ctx.onCancel` handlers, or completed
   * steps with a compensation): a cancel while pending, waiting or paused then goes through
   * `cancelling`, and a failure by the dwell scanner makes the task due with its error, so that a
   * worker replays it and runs that cleanup.
   */
  hasCleanup: boolean;
  /**
   * The steps retries ran again because their compensation had undone them, with how many times
   * (JSON object by step id), or null: their idempotency keys take a `:redo<n>` suffix.
   */
  redo: string | null;
  /** A short text naming the task for people (start option `title`, or the workflow's `title(input)`), or null. */
  title: string | null;
  /** A debounced start's key (`engine.start(…, { debounce })`), or null. */
  debounceKey: string | null;
  /** A singleton start's key (`engine.start(…, { singleton })`), or null. */
  singletonKey: string | null;
  /** The key of the workflow's per-key concurrency limit, computed from the input at start, or null. */
  concurrencyKey: string | null;
  /** At most this many tasks of `concurrencyKey` hold a lease at once (null without a key). */
  concurrencyLimit: number | null;
  /** 0..1000, higher first: claims order due tasks by `runAt - priority * 1000`. */
  priority: number;
  /**
   * Started behind its key's limit and not yet released: left out of claims until room opens in
   * its key (see `store/key-queues.ts`). Set by the store, never by a transition.
   */
  heldByKey: boolean;
  /** The task that started this one (`ctx.startChild`), or null. Its end signals the parent (`child:<id>`). */
  parentId: string | null;
  /** The first task of this one's tree, or null for a task started from outside. */
  rootId: string | null;
  /** 0 for a task started from outside; a child's is its parent's + 1. */
  depth: number;
  /** The task's tags as a JSON object of strings (`start(…, { tags })`, `ctx.setTags`), or null. */
  tags: string | null;
  /** The task this one was forked from (`engine.fork`), or null. */
  forkedFrom: string | null;
  /**
   * A re-run that undoes first (`retry(id, { fromStep, compensate: true })`) has not finished
   * undoing: the journal position of its `fromStep`, or null. The run that claims the task runs the
   * compensations of the completed steps from there on (see `run/undo-rerun.ts`).
   */
  undoFrom: number | null;
}

export type StepKind = 'step' | 'sleep' | 'event';
/**
 * - `completed`: output recorded; replay returns it.
 * - `failed`: failed for good; replay throws the recorded error (until the task is retried).
 * - `retrying`: an attempt failed and another is due at `wakeAt`.
 * - `waiting`: a sleep or event wait in progress, until `wakeAt` (or a signal).
 */
export type StepStatus = 'completed' | 'failed' | 'retrying' | 'waiting';

/** One journal entry: the checkpoint of one step (or sleep, or event wait) of a task. */
export interface StepRow {
  taskId: string;
  /** Position in the workflow's call order (0-based): the replay identity with `name`. */
  seq: number;
  /** Step id: the step's name, with `#n` from the second occurrence on (`fetch`, `fetch#2`). */
  name: string;
  kind: StepKind;
  status: StepStatus;
  output: string | null;
  error: string | null;
  attempts: number;
  startedAt: number | null;
  finishedAt: number | null;
  wakeAt: number | null;
  /** Lease epoch of the run that wrote it. */
  epoch: number;
  /**
   * For a result handed to the workflow code (a step's output or failure, an elapsed sleep, an
   * event): its place (1, 2, …) in the order the code received results. Replay keeps that order.
   */
  done: number | null;
  /**
   * The `done` of the last result the code had received when it made this call (0: none), so
   * that a retry can tell a branch that ran beside a failed step from what followed the failure.
   * `null` on rows written before it was recorded.
   */
  calledAfter: number | null;
  /**
   * A step with a business key: `v<keyVersion>:<key>`, the key its attempts receive (before any
   * `:redo<n>` suffix); `null` for every other row (its key is the engine's, from task and name).
   */
  businessKey: string | null;
}

export interface SignalRow {
  id: number;
  taskId: string;
  name: string;
  payload: string | null;
  idempotencyKey: string | null;
  createdAt: number;
  /** Journal position of the event wait that consumed it; `null` while unconsumed. */
  consumedSeq: number | null;
}

/** Columns a transition may set besides status/version/updated_at. Absent keys are left alone. */
export interface TaskPatch {
  output?: string | null;
  error?: string | null;
  runAt?: number | null;
  /** `true` clears lease owner and expiry. */
  clearLease?: boolean;
  /**
   * `true` clears the lease owner and makes the lease expire now, in the store's time (the
   * database's clock on PostgreSQL): a worker reclaims the task at its next claim.
   */
  expireLease?: boolean;
  pauseRequested?: boolean;
  wait?: string | null;
  /** Events a parked task waits for (a signal of any of them makes it due). */
  waitEvents?: readonly string[] | null;
  cancelReason?: string | null;
  finishedAt?: number | null;
  /** A new deadline (a retry may lift or move it). */
  deadlineAt?: number | null;
  hasCleanup?: boolean;
  redo?: string | null;
  undoFrom?: number | null;
  /** `true` adds one to `retries`. */
  incrementRetries?: boolean;
  /** `true` adds one to `epoch`: the run that held the task is fenced off (its writes are refused). */
  incrementEpoch?: boolean;
}
