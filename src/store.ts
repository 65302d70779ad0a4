/**
 * @module store
 * The Store contract: what the engine needs from a database, in terms of rows and guarded writes.
 * A store knows SQL and nothing about workflows; the engine knows workflows and nothing about SQL.
 * JSON payloads (input, output, errors, details) travel as text and are never parsed here.
 *
 * Every status change is a {@link TransitionWrite}: the lifecycle module has already picked the
 * target status and the legal source statuses; the store re-checks them atomically
 * (`UPDATE … WHERE status IN (…) AND version = ?` or `AND epoch = ?`) and appends its log entries
 * in the same transaction. Worker writes are fenced by the lease epoch: a worker that lost its
 * lease (another worker claimed the task and bumped the epoch) gets its writes refused.
 *
 * The event log. Every write that changes a task appends its entries to the task's log in the
 * same transaction, numbered by `seq` (1, 2, … per task, no gaps, in commit order even under
 * concurrent writers of one task, from a counter on the task row). A step's result is carried by
 * its journal row (`log_seq`), not written twice: a checkpoint stays one row. Entries with
 * `carriedBy` name that row; before a write deletes or rewrites a carrying row, its entry is
 * stored on its own with the same seq, so the log stays append-only. Entries come from two places (formats in `log-entries.ts`):
 * - the engine: `TransitionWrite.log` (the transition's own entry), appended after what the
 *   store derives from the same write, so that a run's last step comes before its `complete`;
 * - the store, derived from what it writes, in this order: one
 *   `step:<status>` entry per journal row written (`stepEntry`), one `step:forgotten` entry for
 *   `deleteSteps` (`forgottenEntry`), one `signal:consumed` per consumed signal
 *   (`signalConsumedEntry`); a `signal:received` entry for a recorded signal
 *   (`signalReceivedEntry`, actor from the SignalWrite); and a `transition` entry for each task
 *   it claims (`claim` / `reclaim`, actor the worker, with the
 *   new epoch; a reclaim's detail names the previous owner) or moves on lease expiry (actor
 *   system `lease-expiry`). Derived step, forgotten and consumed entries take the actor of the
 *   write: the first `log` entry's, or for a StepWrite the worker holding the lease.
 */
import type { TaskStatus } from './lifecycle.ts';
import type { IdempotencyBackend } from './idempotency/records.ts';
import type { TransactionRunner } from './transaction-types.ts';

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

/** Who caused an entry of the event log. */
export type ActorKind = 'user' | 'worker' | 'system';

/**
 * One entry of a task's append-only event log, as stored. `seq` numbers a task's entries 1, 2, 3…
 * without gaps, in commit order; `data` is JSON text the store never parses (except where it
 * builds the entries of its own operations, see {@link Store}).
 */
export interface EventRow {
  taskId: string;
  seq: number;
  at: number;
  type: string;
  actorKind: ActorKind;
  actorId: string;
  data: string | null;
}

/** An entry for the store to append; it gets the task's next `seq` in the same transaction. */
export interface NewEvent {
  type: string;
  actorKind: ActorKind;
  actorId: string;
  /** JSON text. */
  data: string | null;
  /**
   * The journal position whose row carries this entry (see {@link journalCarries}): the store
   * stores the entry's seq on that row (`log_seq`) instead of writing an entry of its own.
   */
  carriedBy?: number;
}

/** Seqs of one task's log strictly between `after` and `before` (see `Store.getEventRanges`). */
export interface EventRange {
  taskId: string;
  after: number;
  before: number;
}

/** A read of the log across all tasks, resumable from `cursor` (opaque; `null` from the start). */
export interface LogPage {
  /**
   * The entries stored on their own (not step results, which journal rows carry, nor entries moved
   * from such rows: see `RESULT_ENTRY_TYPES` in log-entries.ts), each with the cursor that resumes right after
   * it and `prevSeq`: the highest seq below its own among the task's entries stored on their own
   * that come before it in this log's order (0: none). The seqs in between are the step results
   * that came before it and, where the log's order is not the task's (PostgreSQL: see `readLog`
   * there), the task's entries that come after it in the log although their seqs are lower.
   */
  events: Array<EventRow & { cursor: string; prevSeq: number }>;
  /** Pass back as `after` to read what follows (the last event's cursor, or `after` if none). */
  cursor: string | null;
  /**
   * With a `mark` (see `Store.logMark`): entries committed before the mark was taken may not be
   * readable yet, because transactions that were writing then are still running. Read again
   * later (after them) to reach the mark; `false` once everything up to it was readable.
   */
  behind: boolean;
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
  /** `true` adds one to `retries`. */
  incrementRetries?: boolean;
}

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
}

export type WriteOp = TransitionWrite | StepWrite;
/** For a transition: the updated row, or `null` if its guard failed; for a step: accepted or not. */
export type WriteResult = TaskRow | null | boolean;

/** Log entries of a run that go with no journal row (see {@link Store.appendRunEvents}). */
export interface RunEventsWrite {
  taskId: string;
  epoch: number;
  at: number;
  events: readonly NewEvent[];
  /** The new `usage` column (JSON text). */
  usage: string;
}

/** Partial output of a streaming step while it streams: text deltas, or a retried attempt's reset frame. */
export interface StreamChunkRow {
  /** Orders a task's chunks (resume after the last one seen). */
  id: number;
  taskId: string;
  step: string;
  attempt: number;
  kind: 'delta' | 'reset';
  delta: string;
  at: number;
}

export interface ChunksWrite {
  taskId: string;
  epoch: number;
  chunks: ReadonlyArray<Omit<StreamChunkRow, 'id' | 'taskId'>>;
}

export interface NewTask {
  id: string;
  workflow: string;
  workflowVersion: string;
  input: string | null;
  idempotencyKey: string | null;
  runAt: number;
  createdAt: number;
  /** When the task must be finished (ms), or null. */
  deadlineAt?: number | null;
  /** The status it starts in (the lifecycle's `CREATION`). */
  status: TaskStatus;
  /** The initial `usage` column (a per-start budget), or null. */
  usage?: string | null;
  /** The log entry of its creation (seq 1), written with the row. */
  log: NewEvent;
  /** Announced to other processes if the task was created. */
  notify?: WakeEvent;
}

/*
 * Leases and time: `now` in the requests below is the caller's clock. SQLite judges and grants
 * leases by it; PostgreSQL judges and grants them by the database's clock (`leaseMs` from the
 * database's now) and uses `now` only for due times and log timestamps, so that workers whose
 * clocks disagree still agree on whose lease is live.
 */
export interface ClaimRequest {
  workerId: string;
  now: number;
  leaseMs: number;
  limit: number;
  /** Only tasks of these workflows. */
  workflows: readonly string[];
  /**
   * Only these versions of a workflow (tasks started under another version are left to workers
   * that serve it). A workflow without an entry: any version.
   */
  versions?: Readonly<Record<string, readonly string[]>>;
  /** Statuses a due task is claimed from (lifecycle `claim` sources), and the target. */
  claim: { from: readonly TaskStatus[]; to: TaskStatus };
  /**
   * Statuses an expired-lease task is reclaimed from (lifecycle `reclaim` sources), and the target
   * of each (a reclaimed `cancelling` task stays `cancelling`).
   */
  reclaim: { from: readonly TaskStatus[]; to: Readonly<Partial<Record<TaskStatus, TaskStatus>>> };
  /** Per-workflow caps on tasks in leased statuses, across all workers. */
  concurrency?: Readonly<Record<string, number>>;
}

export interface ClaimedTask {
  task: TaskRow;
  event: 'claim' | 'reclaim';
  steps: StepRow[];
  signals: SignalRow[];
}

export interface HeartbeatRequest {
  workerId: string;
  now: number;
  leaseMs: number;
  held: readonly { taskId: string; epoch: number }[];
}

export interface HeldTask {
  taskId: string;
  status: TaskStatus;
  pauseRequested: boolean;
  cancelReason: string | null;
}

/**
 * Expired leases in `from` statuses are moved to `to` with a `transition` log entry (`event`, actor
 * system `lease-expiry`, detail `{ reason: 'lease expired', previousOwner }`, plus `note` if given).
 */
export interface ExpireRequest {
  now: number;
  event: string;
  from: readonly TaskStatus[];
  to: TaskStatus;
  set: TaskPatch;
  /**
   * Only leases that expired at least this long ago (0 by default: every expired lease). Judged
   * like expiry itself (by the database's clock on PostgreSQL, by `now` on SQLite).
   */
  expiredForMs?: number;
  /** Added to the entry's detail as `note`, with `{workflow}` and `{version}` replaced by the task's. */
  note?: string;
}

export interface ListQuery {
  statuses?: readonly TaskStatus[];
  workflow?: string;
  limit: number;
  /** Return tasks with ids below this one (ids are time-ordered; newest first). */
  before?: string;
}

export interface SignalWrite {
  taskId: string;
  name: string;
  payload: string | null;
  idempotencyKey: string | null;
  at: number;
  /** Who sent it (recorded in the `signal:received` entry). */
  actorKind: ActorKind;
  actorId: string;
  /** Announced to other processes if the signal was recorded. */
  notify?: WakeEvent;
  /**
   * Record it only if the task is `waiting` for an event of this name (else `refused`, nothing
   * written), and then stop waiting for any event: the task is due, and a second such signal is
   * refused until it waits again. Checked and written in one transaction (the events of a state
   * machine: one accepted per wait).
   */
  onlyIfAwaited?: boolean;
}

/** What `insertSignal` answers: a new signal recorded (or its key known), or refused by `onlyIfAwaited`. */
export interface SignalInsert {
  created: boolean;
  /** Set when `onlyIfAwaited` refused it: the task's status and the events it waited for. */
  refused?: { status: TaskStatus; waitEvents: string[] };
}

export interface WorkflowRegistration {
  name: string;
  version: string;
  at: number;
}

/** Why a woken worker should look again: what changed. */
export type WakeReason = 'task' | 'cancel' | 'pause' | 'resume' | 'settled';
export interface WakeEvent {
  reason: WakeReason;
  /** The task; `'*'` means "anything may have changed" (sent after a listener reconnects: poll). */
  taskId: string;
  /**
   * A batch's tasks, when one notification stands for several (then `taskId` is `'*'`, so that a
   * listener that does not know this field looks at everything).
   */
  taskIds?: string[];
  workflow?: string;
  /** With `reason: 'cancel'`: the user's reason. */
  cancelReason?: string | null;
  /**
   * The engine that announced it, when that engine has told its own workers already (its
   * subscription then ignores the echo).
   */
  origin?: string;
}

/**
 * What a subscriber hears. `'work'` (the default): a task became runnable, or was cancelled,
 * paused or resumed — what workers act on. `'settled'`: a task finished — what `engine.result()`
 * waits for. Kept apart so that workers, which never wait for results, are not sent a message
 * for every task that any worker finishes.
 */
export type WakeTopic = 'work' | 'settled';

/** The topic of a wake-up event. */
export function topicOf(event: WakeEvent): WakeTopic {
  return event.reason === 'settled' ? 'settled' : 'work';
}

export interface NextRunRequest {
  workflows: readonly string[];
  after: number;
}


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
export interface ApprovalUpdate {
  id: string;
  version: number;
  set: ApprovalPatch;
  at: number;
  log: readonly NewEvent[];
  taskStatuses?: readonly TaskStatus[];
  epoch?: number;
  wake?: { name: string; key: string };
  notify?: WakeEvent;
}

/**
 * Log entries about a task that change nothing else (a dwell alert): appended only while the task's
 * `version` is still `version`, which the write bumps (so two scanners cannot both append them).
 */
export interface LogAppend {
  taskId: string;
  version: number;
  at: number;
  log: readonly NewEvent[];
}

/** Approvals by task, status, listed approver or workflow; oldest first. */
export interface ApprovalQuery {
  taskId?: string;
  statuses?: readonly ApprovalStatus[];
  approver?: string;
  workflow?: string;
  /** Only approvals whose task is in one of these statuses. */
  taskStatuses?: readonly TaskStatus[];
  /** Open approvals (`pending`, `escalated`) only while their task is in one of these statuses; settled ones always. */
  openOnlyFor?: readonly TaskStatus[];
  limit: number;
}

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
  /** Only tasks of these workflows. */
  workflows?: readonly string[];
  /** Only tasks due by this time (`run_at` at or before it). */
  dueBy?: number;
}

/** A task a deletion removed. */
export interface DeletedTask {
  id: string;
  workflow: string;
  status: TaskStatus;
}

export interface Store {
  readonly dialect: 'sqlite' | 'postgres';
  /** A printable description (no secrets). */
  readonly description: string;
  /** How many `writeBatch` calls a worker may have in flight at once (1 for a single connection). */
  readonly parallelWrites: number;
  /** Applies pending migrations; safe when several processes call it at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;

  insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }>;
  /**
   * Many tasks in one transaction (one multi-row statement where the dialect allows), each as
   * {@link insertTask} would insert it, results in the order given: a task whose idempotency key
   * exists (or was taken by an earlier task of the same batch) comes back as the existing task,
   * `created: false`. The tasks' own `notify` is ignored: `notify`, if given, is announced once,
   * if at least one task was created.
   */
  insertTasks(tasks: readonly NewTask[], notify?: WakeEvent): Promise<Array<{ task: TaskRow; created: boolean }>>;
  getTask(id: string): Promise<TaskRow | null>;
  /**
   * The tasks of `ids` that exist, each once, in any order, read together (one statement on
   * PostgreSQL). Optional: without it, `engine.result()` reads each task with `getTask`.
   */
  getTasks?(ids: readonly string[]): Promise<TaskRow[]>;
  findTaskByKey(idempotencyKey: string): Promise<TaskRow | null>;
  listTasks(query: ListQuery): Promise<TaskRow[]>;
  getSteps(taskId: string): Promise<StepRow[]>;
  /**
   * A task's log entries with `seq > after` (default 0), oldest first, at most `limit` (default
   * all): its entries of their own merged with those its journal rows carry.
   */
  getEvents(taskId: string, after?: number, limit?: number): Promise<EventRow[]>;
  /**
   * For each range, its task's log entries with `after < seq < before`, oldest first (as
   * `getEvents` reads them), all in one read: the cross-task reader fills in a page's step results
   * with it.
   */
  getEventRanges(ranges: readonly EventRange[]): Promise<EventRow[][]>;
  /**
   * Entries of every task committed after `after` (a cursor from an earlier page; `null`: from the
   * start), in an order that never places an entry before one already returned: a reader that
   * resumes from a cursor misses nothing, even under concurrent writers. Step results carried by
   * their journal rows (see `journalCarries`) are not in it: they are read per task.
   * With `mark`, the page says whether the log is readable up to it yet (`LogPage.behind`).
   */
  readLog(after: string | null, limit: number, mark?: string | null): Promise<LogPage>;
  /**
   * The end of the log as of now, for `readLog`'s `mark`: every entry committed before this call
   * is readable once a page is no longer `behind` it. `null` where every committed entry is
   * readable at once (SQLite: one writer at a time, rows in commit order).
   */
  logMark(): Promise<string | null>;
  getSignals(taskId: string): Promise<SignalRow[]>;

  /**
   * One guarded transition (see {@link TransitionWrite}). Returns the row as it is after the whole
   * write, including the waitEvents rule (a waiting task made due by an earlier signal).
   */
  transition(write: TransitionWrite): Promise<TaskRow | null>;
  /** Many fenced writes in one transaction; each op is guarded on its own. */
  writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]>;
  /**
   * `writeBatch`, done before returning: offered by a store on a synchronous driver (SQLite), so
   * that a lone run's checkpoint costs no promise round of its own. Same results, same errors.
   */
  writeBatchNow?(ops: readonly WriteOp[]): WriteResult[];

  /**
   * Records the progress a run reports (JSON text), only while the task is leased at `epoch`; no
   * log entry, no status change. Returns whether it was written.
   */
  setProgress(taskId: string, epoch: number, progress: string): Promise<boolean>;

  /**
   * Appends `events` to the task's log written by the run leased at `epoch` (model usage of an
   * attempt), and sets the task's `usage` column to `usage`, in one transaction; refused (false)
   * once the task is no longer leased at that epoch.
   */
  appendRunEvents(write: RunEventsWrite): Promise<boolean>;

  /**
   * Stream chunks of a streaming step (see `StreamChunkRow`): appended only while the task is
   * leased at `epoch` (false otherwise); read after an id; deleted per step once its stream ended.
   */
  appendChunks(write: ChunksWrite): Promise<boolean>;
  getChunks(taskId: string, after: number, limit: number): Promise<StreamChunkRow[]>;
  deleteChunks(taskId: string, step: string): Promise<void>;

  claim(request: ClaimRequest): Promise<ClaimedTask[]>;
  heartbeat(request: HeartbeatRequest): Promise<HeldTask[]>;
  expireLeases(request: ExpireRequest): Promise<number>;
  /** The workers holding live leases (for finding owners that died on this host). */
  leaseOwners(now: number): Promise<string[]>;
  /**
   * Ends the leases of `owner` now (their expiry set to `now`), so that the next claim reclaims its
   * tasks: for an owner known to be dead. No status changes; the reclaim records the previous owner.
   */
  endLeasesOf(owner: string, now: number): Promise<number>;
  /**
   * When the next pending or waiting task of these workflows falls due: the earliest `runAt`
   * later than `after`, or `null` if none is scheduled. Lets an idle worker sleep until then.
   */
  nextRunAt(request: NextRunRequest): Promise<number | null>;

  /**
   * Records a signal (deduplicated by `(taskId, idempotencyKey)`) and, if the task is waiting for
   * an event of that name, makes it due at `at`. Returns whether a new signal was recorded (or
   * why `onlyIfAwaited` refused it), or `null` if the task does not exist.
   */
  insertSignal(signal: SignalWrite): Promise<SignalInsert | null>;

  /** Creates a run's approval (see {@link ApprovalInsert}); `null` if the task is not leased at the epoch. */
  insertApproval(write: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null>;
  getApproval(id: string): Promise<ApprovalRow | null>;
  listApprovals(query: ApprovalQuery): Promise<ApprovalRow[]>;
  /** A guarded change of an approval (see {@link ApprovalUpdate}): the row after it, or `null` if refused. */
  updateApproval(write: ApprovalUpdate): Promise<ApprovalRow | null>;

  /** Appends entries to a task's log (see {@link LogAppend}); false if its version moved on. */
  appendEvents(write: LogAppend): Promise<boolean>;

  /**
   * Deletes up to `limit` tasks that `deletion` selects, oldest id first, each with everything it
   * owns (journal, log, signals, approvals, stream chunks), in one transaction. A task that another
   * transaction holds at that moment (a command, a signal, a decision) is passed over: the next
   * deletion takes it if it still qualifies. Returns the tasks deleted.
   */
  deleteTasks(deletion: TaskSelection, limit: number): Promise<DeletedTask[]>;
  /**
   * How many tasks `selection` selects now, by status (statuses with none are left out); with
   * `cap`, each status is counted up to `cap` only (work bounded by it, whatever the table's size).
   */
  countTasks(selection: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>>;

  registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void>;
  listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>>;

  /**
   * Subscribes to wake-ups from other processes (PostgreSQL LISTEN/NOTIFY): the `notify` events
   * of writes committed anywhere, of one topic. Stores without a cross-process channel do not
   * implement it; callers then rely on polling and heartbeats.
   */
  subscribe?(listener: (event: WakeEvent) => void, topic?: WakeTopic): Promise<(() => Promise<void>) | null>;
  /** Announces a change to other processes (no-op where unsupported). */
  notify?(event: WakeEvent): Promise<void>;

  /** The idempotency records kept in this database (see `idempotency/records.ts`). */
  idempotencyRecords?(): IdempotencyBackend;
  /** Transactional steps (`ctx.transaction`): the user's SQL and a checkpoint in one transaction. */
  runInTransaction?: TransactionRunner['runInTransaction'];
  /** Appends entries to a task's log in one transaction; `false` if there is no such task. */
  appendTaskEvents?(taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean>;
}
