/**
 * @module postgres/store
 * The distributed store: one PostgreSQL schema shared by any number of workers on any number of
 * machines. Semantics are those of the SQLite store (the reference); what differs is how
 * concurrent writers are serialized:
 *
 * - A transition is one statement: a CTE that locks the task row by its primary key (`SELECT …
 *   FOR UPDATE`, the guard checked on the newest row version), updates it, copies its status,
 *   epoch and lease owner to the task's head (`task_heads`, see heads.ts) while bumping the head's
 *   log counter `event_seq` by the number of entries, appends the log entries numbered from that
 *   counter, and upserts steps / consumes signals only if the update happened. A transition that
 *   sets `waitEvents` runs a second statement in the same transaction (after the lock is held, so
 *   that its fresh snapshot sees any signal committed before), see transition.ts.
 * - A step write is one autocommit statement fenced by an UPDATE of the task's head (a narrow row,
 *   not the task row) that bumps its log counter only while the writer's epoch is current (see
 *   `appendFence`): a claim that bumps the epoch either waits for the write, or makes it fail its
 *   re-check; concurrent appenders of one task queue on the row lock and number their entries one
 *   after the other.
 * - The log (`events`) is read across tasks in (xid, id) order, below the snapshot's xmin (see
 *   read.ts and sql/postgres/000003_events.sql).
 * - Claims lock candidates with `FOR UPDATE SKIP LOCKED`, so that workers take disjoint tasks
 *   without waiting on each other; per-workflow caps serialize on `pg_advisory_xact_lock`.
 * - Wake-ups travel by LISTEN/NOTIFY on two channels named after the schema: `<schema>_wake` for
 *   work (what workers listen to) and `<schema>_done` for finished tasks (what result waiters
 *   listen to).
 *
 * This class is a facade: it owns the store's context (pool, kept connection, listeners, see
 * connection.ts) and hands each operation to the module that does it: read.ts, insert.ts,
 * transition.ts, write-batch.ts, claim.ts, leases.ts, signals.ts, retention.ts, workflows.ts, listen.ts.
 *
 * `pg` is an optional peer dependency: it is loaded when the first PostgresStore is built.
 */
import { setTags } from './tags.ts';
import { forkTask } from './fork.ts';
import * as blobs from './blobs.ts';
import * as alerts from './alerts.ts';
import type { BlobTouch, BlobUsage, BlobWrite, CollectedBlob, StoredBlob } from '../store/blobs.ts';
import type { AlertQuery, AlertRow } from '../store/alerts.ts';
import { close, migrate, openContext, type PgContext } from './connection.ts';
import { findTaskByKey, getEventRanges, getEvents, getEventsOfType, getSignalByKey, getSignals, pendingSignals, getSteps, getTask, getTasks, listTasks, logMark, readLog } from './read.ts';
import { insertTask, insertTasks } from './insert.ts';
import * as keyed from './keyed-starts.ts';
import { queuePosition } from './queue-position.ts';
import { transition } from './transition.ts';
import { writeBatch } from './write-batch.ts';
import { claim } from './claim.ts';
import { appendChunks, appendRunEvents, deleteChunks, getChunks, logPositions, purgeChunks } from './run-events.ts';
import { endLeasesOf, expireLeases, heartbeat, leaseOwners, nextRunAt, setProgress } from './leases.ts';
import { releaseHeld } from './key-queues.ts';
import { insertSignal } from './signals.ts';
import { appendEvents, getApproval, insertApproval, listApprovals, updateApproval } from './approvals.ts';
import { listWorkflows, recordPresence, registerWorkflows, removePresence, servedVersions } from './workflows.ts';
import * as schedules from './schedules.ts';
import * as rateLimits from './rate-limits.ts';
import { ackDeletions, claimDeletions, countTasks, deleteTasks } from './retention.ts';
import { notify, subscribe } from './listen.ts';
import { PostgresIdempotency } from './idempotency.ts';
import { appendTaskEvents } from './append-events.ts';
import { runInTransaction } from './transaction.ts';
import type { Transaction } from '../store/transactions.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { IdempotencyBackend } from '../store/idempotency.ts';
import { InvalidArgumentError } from '../errors.ts';
import { DEFAULT_DEADLINES, checkDeadline } from './deadlines.ts';
import type { ApprovalInsert, ApprovalQuery, ApprovalRow, ApprovalUpdate, LogAppend, DeletedTask, DeletionNote, DeletionRecord } from '../store.ts';
import type { TaskSelection, ClaimRequest, ClaimedTask, EventRange, EventRow, ExpireRequest, HeartbeatRequest, HeldTask, ListQuery } from '../store.ts';
import type { TagChange, LogPage, NewEvent, NewTask, NextRunRequest, RunEventsWrite, ChunksWrite, StreamChunkRow, SignalInsert, SignalRow, LogPosition } from '../store.ts';
import type { SignalWrite, StepRow, Store, TransactionCheckpoint, TaskRow, QueuePosition, TransitionWrite, WakeEvent, WakeTopic, WorkerPresence } from '../store.ts';
import type { WorkflowRegistration, WriteOp, WriteResult, ScheduleAdvance, ScheduleDefinition, ScheduleRow, DebounceWrite, SingletonAnswer } from '../store.ts';
import type { RateDraw, RateDrawRequest } from '../store.ts';

export interface PostgresStoreOptions {
  /**
   * The schema that holds Stepwise's tables; created by `migrate()`. Several deployments (or
   * test runs) can share one database with different schemas. A plain identifier
   * (letters, digits, `_`; at most 58 characters, since the wake-up channels are `<schema>_wake`
   * and `<schema>_done`).
   * @defaultValue 'stepwise'
   */
  schema?: string;
  /**
   * Connections in the pool. Each claim, batch or multi-statement write holds one for its
   * transaction; LISTEN uses a separate connection outside the pool.
   * @defaultValue 10
   */
  poolSize?: number;
  /**
   * How long opening a connection may take (through authentication) before the call fails with
   * STORE_UNAVAILABLE. URL: `?connectTimeoutMs=`.
   * @defaultValue 10000
   */
  connectTimeoutMs?: number;
  /**
   * How long one statement may run: PostgreSQL's `statement_timeout` and
   * `idle_in_transaction_session_timeout`; the client gives up on an answer 2 s later (a network
   * that drops packets) and destroys the connection. Calls that time out fail with
   * STORE_UNAVAILABLE. URL: `?statementTimeoutMs=`.
   * @defaultValue 30000
   */
  statementTimeoutMs?: number;
  /** Clock for migration timestamps only; everything else gets "now" from the caller. */
  now?: () => number;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,57}$/;

export class PostgresStore implements Store {
  readonly dialect = 'postgres' as const;
  /** Half the pool, leaving connections for claims, heartbeats and commands. */
  readonly parallelWrites: number;
  readonly description: string;
  /** The schema holding the tables (unquoted). */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel of this schema's work: started, resumed, signalled, cancelled… */
  readonly channel: string;
  /** The LISTEN/NOTIFY channel of this schema's finished tasks. */
  readonly settledChannel: string;
  readonly #c: PgContext;
  readonly #now: () => number;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    const schema = options.schema ?? 'stepwise';
    if (!SCHEMA_NAME.test(schema)) {
      throw new InvalidArgumentError(`Invalid PostgreSQL schema name "${schema}": use letters, digits and _ (not first), at most 58 characters.`);
    }
    const poolSize = options.poolSize ?? 10;
    if (!Number.isInteger(poolSize) || poolSize < 1) throw new InvalidArgumentError(`poolSize must be a positive integer, got ${poolSize}`);
    const deadlines = {
      connectTimeoutMs:
        options.connectTimeoutMs === undefined ? DEFAULT_DEADLINES.connectTimeoutMs : checkDeadline('connectTimeoutMs', options.connectTimeoutMs, 'in the PostgreSQL store options'),
      statementTimeoutMs:
        options.statementTimeoutMs === undefined ? DEFAULT_DEADLINES.statementTimeoutMs : checkDeadline('statementTimeoutMs', options.statementTimeoutMs, 'in the PostgreSQL store options'),
    };
    this.#c = openContext(url, schema, poolSize, deadlines);
    this.parallelWrites = Math.max(1, Math.floor(poolSize / 2));
    this.schema = schema;
    this.channel = this.#c.channel;
    this.settledChannel = this.#c.settledChannel;
    this.description = this.#c.description;
    this.#now = options.now ?? Date.now;
  }

  migrate(): Promise<void> {
    return migrate(this.#c, this.#now());
  }
  close(): Promise<void> {
    return close(this.#c);
  }

  getTask(id: string): Promise<TaskRow | null> {
    return getTask(this.#c, id);
  }
  queuePosition(task: TaskRow, now: number): Promise<QueuePosition> {
    return queuePosition(this.#c, task, now);
  }
  getTasks(ids: readonly string[]): Promise<TaskRow[]> {
    return getTasks(this.#c, ids);
  }
  findTaskByKey(key: string): Promise<TaskRow | null> {
    return findTaskByKey(this.#c, key);
  }
  setTags(taskId: string, change: TagChange): Promise<Record<string, string> | 'too-many' | null> {
    return setTags(this.#c, taskId, change);
  }
  forkTask(task: NewTask & { forkedFrom: string }, seqs: readonly number[]): Promise<TaskRow> {
    return forkTask(this.#c, task, seqs);
  }
  readonly putBlobs = (w: BlobWrite): Promise<void> => blobs.putBlobs(this.#c, w);
  readonly touchBlobs = (w: BlobTouch): Promise<Set<string>> => blobs.touchBlobs(this.#c, w);
  readonly getBlobs = (hashes: readonly string[]): Promise<Map<string, StoredBlob>> => blobs.getBlobs(this.#c, hashes);
  readonly shareBlobs = (from: string, to: string): Promise<void> => blobs.shareBlobs(this.#c, from, to);
  readonly collectBlobs = (before: number, limit: number): Promise<CollectedBlob[]> => blobs.collectBlobs(this.#c, before, limit);
  readonly blobUsage = (): Promise<BlobUsage> => blobs.blobUsage(this.#c);
  readonly insertAlert = (row: AlertRow): Promise<void> => alerts.insertAlert(this.#c, row);
  readonly listAlerts = (q: AlertQuery): Promise<AlertRow[]> => alerts.listAlerts(this.#c, q);
  readonly purgeAlerts = (before: number, limit: number): Promise<number> => alerts.purgeAlerts(this.#c, before, limit);
  listTasks(q: ListQuery): Promise<TaskRow[]> {
    return listTasks(this.#c, q);
  }
  getSteps(taskId: string): Promise<StepRow[]> {
    return getSteps(this.#c, taskId);
  }
  getEvents(taskId: string, after?: number, limit?: number): Promise<EventRow[]> {
    return getEvents(this.#c, taskId, after, limit);
  }

  getEventsOfType(taskId: string, types: readonly string[]): Promise<EventRow[]> {
    return getEventsOfType(this.#c, taskId, types);
  }
  getEventRanges(ranges: readonly EventRange[]): Promise<EventRow[][]> {
    return getEventRanges(this.#c, ranges);
  }
  readLog(after: string | null, limit: number, mark?: string | null): Promise<LogPage> {
    return readLog(this.#c, after, limit, mark);
  }
  logMark(): Promise<string | null> {
    return logMark(this.#c);
  }
  getSignalByKey(taskId: string, idempotencyKey: string): Promise<SignalRow | undefined> {
    return getSignalByKey(this.#c, taskId, idempotencyKey);
  }

  pendingSignals(taskId: string, afterId: number): Promise<SignalRow[]> {
    return pendingSignals(this.#c, taskId, afterId);
  }

  getSignals(taskId: string): Promise<SignalRow[]> {
    return getSignals(this.#c, taskId);
  }

  insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
    return insertTask(this.#c, task);
  }
  insertTasks(tasks: readonly NewTask[], notify?: WakeEvent): Promise<Array<{ task: TaskRow; created: boolean }>> {
    return insertTasks(this.#c, tasks, notify);
  }
  startDebounced(task: NewTask, write: DebounceWrite, notify?: WakeEvent): Promise<{ task: TaskRow; created: boolean }> {
    return keyed.startDebounced(this.#c, task, write, notify);
  }
  startSingleton(task: NewTask, notify?: WakeEvent): Promise<SingletonAnswer> {
    return keyed.startSingleton(this.#c, task, notify);
  }
  liveSingleton(workflow: string, key: string): Promise<TaskRow | null> {
    return keyed.liveSingleton(this.#c, workflow, key);
  }
  unclaimedDebounced(workflow: string, key: string): Promise<TaskRow | null> {
    return keyed.unclaimedDebounced(this.#c, workflow, key);
  }
  transition(write: TransitionWrite): Promise<TaskRow | null> {
    return transition(this.#c, write);
  }
  writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    return writeBatch(this.#c, ops);
  }

  claim(r: ClaimRequest): Promise<ClaimedTask[]> {
    return claim(this.#c, r);
  }
  heartbeat(r: HeartbeatRequest): Promise<HeldTask[]> {
    return heartbeat(this.#c, r);
  }
  setProgress(taskId: string, epoch: number, progress: string): Promise<boolean> {
    return setProgress(this.#c, taskId, epoch, progress);
  }
  appendRunEvents(w: RunEventsWrite): Promise<boolean> {
    return appendRunEvents(this.#c, w);
  }
  appendChunks(w: ChunksWrite): Promise<boolean> {
    return appendChunks(this.#c, w);
  }
  getChunks(taskId: string, after: number, limit: number): Promise<StreamChunkRow[]> {
    return getChunks(this.#c, taskId, after, limit);
  }
  logPositions(taskIds: readonly string[]): Promise<LogPosition[]> {
    return logPositions(this.#c, taskIds);
  }
  deleteChunks(taskId: string, step: string): Promise<void> {
    return deleteChunks(this.#c, taskId, step);
  }
  purgeChunks(endedBefore: number, limit: number): Promise<number> {
    return purgeChunks(this.#c, endedBefore, limit);
  }

  leaseOwners(now: number): Promise<string[]> {
    return leaseOwners(this.#c, now);
  }
  endLeasesOf(owner: string, now: number): Promise<number> {
    return endLeasesOf(this.#c, owner, now);
  }
  nextRunAt(r: NextRunRequest): Promise<number | null> {
    return nextRunAt(this.#c, r);
  }
  releaseHeld(now: number): Promise<number> {
    return releaseHeld(this.#c, now);
  }
  expireLeases(r: ExpireRequest): Promise<number> {
    return expireLeases(this.#c, r);
  }
  insertSignal(s: SignalWrite): Promise<SignalInsert | null> {
    return insertSignal(this.#c, s);
  }
  insertApproval(w: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null> {
    return insertApproval(this.#c, w);
  }
  getApproval(id: string): Promise<ApprovalRow | null> {
    return getApproval(this.#c, id);
  }
  listApprovals(q: ApprovalQuery): Promise<ApprovalRow[]> {
    return listApprovals(this.#c, q);
  }
  updateApproval(w: ApprovalUpdate): Promise<ApprovalRow | null> {
    return updateApproval(this.#c, w);
  }
  appendEvents(w: LogAppend): Promise<boolean> {
    return appendEvents(this.#c, w);
  }
  deleteTasks(deletion: TaskSelection, limit: number, note?: DeletionNote): Promise<DeletedTask[]> {
    return deleteTasks(this.#c, deletion, limit, note);
  }
  claimDeletions(now: number, leaseMs: number, limit: number): Promise<DeletionRecord[]> {
    return claimDeletions(this.#c, now, leaseMs, limit);
  }
  ackDeletions(taskIds: readonly string[]): Promise<void> {
    return ackDeletions(this.#c, taskIds);
  }
  countTasks(selection: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>> {
    return countTasks(this.#c, selection, cap);
  }
  recordPresence(presence: WorkerPresence, forgetBefore: number): Promise<void> {
    return recordPresence(this.#c, presence, forgetBefore);
  }
  removePresence(workerId: string): Promise<void> {
    return removePresence(this.#c, workerId);
  }
  servedVersions(workflow: string, seenSince: number): Promise<string[]> {
    return servedVersions(this.#c, workflow, seenSince);
  }
  registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void> {
    return registerWorkflows(this.#c, workflows);
  }
  listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>> {
    return listWorkflows(this.#c);
  }

  notify(event: WakeEvent): Promise<void> {
    return notify(this.#c, event);
  }

  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>): Promise<{ value: T; accepted: boolean }> {
    return runInTransaction(this.#c, fn, checkpoint);
  }

  #idempotency: PostgresIdempotency | undefined;
  idempotencyRecords(): IdempotencyBackend {
    return (this.#idempotency ??= new PostgresIdempotency(this.#c));
  }
  appendTaskEvents(taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean> {
    return appendTaskEvents(this.#c, taskId, at, entries);
  }
  subscribe(listener: (event: WakeEvent) => void, topic?: WakeTopic): Promise<() => Promise<void>> {
    return subscribe(this.#c, listener, topic);
  }

  putSchedule(d: ScheduleDefinition, nextAt: number | null, at: number): Promise<{ row: ScheduleRow; created: boolean }> {
    return schedules.putSchedule(this.#c, d, nextAt, at);
  }

  getSchedule(id: string): Promise<ScheduleRow | null> {
    return schedules.getSchedule(this.#c, id);
  }

  listSchedules(q: { after?: string; limit: number; workflow?: string }): Promise<ScheduleRow[]> {
    return schedules.listSchedules(this.#c, q);
  }

  dueSchedules(now: number, limit: number): Promise<ScheduleRow[]> {
    return schedules.dueSchedules(this.#c, now, limit);
  }

  advanceSchedule(a: ScheduleAdvance): Promise<boolean> {
    return schedules.advanceSchedule(this.#c, a);
  }

  setSchedulePaused(id: string, paused: boolean, nextAt: number | null, at: number): Promise<ScheduleRow | null> {
    return schedules.setSchedulePaused(this.#c, id, paused, nextAt, at);
  }

  nextScheduleAt(): Promise<number | null> {
    return schedules.nextScheduleAt(this.#c);
  }

  deleteSchedule(id: string): Promise<boolean> {
    return schedules.deleteSchedule(this.#c, id);
  }

  drawRate(r: RateDrawRequest): Promise<RateDraw> {
    return rateLimits.drawRate(this.#c, r);
  }

  settleRate(id: number, tokens: number): Promise<void> {
    return rateLimits.settleRate(this.#c, id, tokens);
  }
}
