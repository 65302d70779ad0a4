/**
 * @module sqlite/store
 * The embedded store: one SQLite file (WAL), shared by any number of worker processes on one
 * machine. better-sqlite3 is synchronous, so every method runs to completion before it returns;
 * every write runs in a `BEGIN IMMEDIATE` transaction, which takes the file's write lock up front
 * (a deferred transaction that upgrades to a writer could fail with SQLITE_BUSY instead of waiting).
 */
import { setTags } from './tags.ts';
import { forkTask } from './fork.ts';
import * as blobs from './blobs.ts';
import * as alerts from './alerts.ts';
import type { BlobTouch, BlobUsage, BlobWrite, CollectedBlob, StoredBlob } from '../store/blobs.ts';
import type { AlertQuery, AlertRow } from '../store/alerts.ts';
import type Database from 'better-sqlite3';
import { openSqlite, type SqliteOptions } from './connection.ts';
import { migrateSqlite } from './migrate.ts';
import { SqliteIdempotency } from './idempotency.ts';
import { SqliteTransactions } from './transaction.ts';
import { SqliteContext } from './context.ts';
import { queuePosition } from './queue-position.ts';
import * as approvals from './approvals.ts';
import * as retention from './retention.ts';
import { claim } from './claim.ts';
import { insertTask, insertTasks } from './insert.ts';
import { byKey, getEventRanges, getEvents, getEventsOfType, getSignalByKey, getSignals, pendingSignals, getSteps, getTask, getTasks, listTasks, readLog } from './read.ts';
import { transition } from './transition.ts';
import { writeBatchNow } from './write-batch.ts';
import { endLeasesOf, expireLeases, heartbeat, leaseOwners, nextRunAt, setProgress } from './leases.ts';
import { releaseHeld } from './key-queues.ts';
import { appendChunks, appendRunEvents, appendTaskEvents, deleteChunks, getChunks, purgeChunks } from './run-events.ts';
import { insertSignal } from './signals.ts';
import { listWorkflows, recordPresence, registerWorkflows, removePresence, servedVersions } from './workflows.ts';
import * as schedules from './schedules.ts';
import * as keyed from './keyed-starts.ts';
import * as rateLimits from './rate-limits.ts';
import type { Transaction } from '../store/transactions.ts';
import type { WakeEvent, WakeTopic } from '../store/wake.ts';
import { CommitWatch } from './commit-watch.ts';
import type { IdempotencyBackend } from '../store/idempotency.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { ApprovalInsert, ApprovalQuery, ApprovalRow, ApprovalUpdate, LogAppend, DeletedTask, DeletionNote, DeletionRecord } from '../store.ts';
import type { TaskSelection, SignalInsert, ClaimRequest, ClaimedTask, EventRange, EventRow, ExpireRequest, HeartbeatRequest, HeldTask } from '../store.ts';
import type { ListQuery, TagChange, LogPage, NewEvent, NewTask, NextRunRequest, RunEventsWrite, ChunksWrite, StreamChunkRow, SignalRow } from '../store.ts';
import type { SignalWrite, StepRow, Store, TransactionCheckpoint, TaskRow, QueuePosition, TransitionWrite, WorkerPresence, WorkflowRegistration } from '../store.ts';
import type { WriteOp, WriteResult, ScheduleAdvance, ScheduleDefinition, ScheduleRow, DebounceWrite, SingletonAnswer, RateDraw } from '../store.ts';
import type { RateDrawRequest } from '../store.ts';

/** How long a migration that finds the file busy is tried again (see `SqliteStore.migrate`). */
const MIGRATE_BUSY_MS = 30_000;

export interface SqliteStoreOptions extends SqliteOptions {
  /** Clock for migration timestamps only; everything else gets "now" from the caller. */
  now?: () => number;
}

/**
 * The facade: it owns the connection's context (see context.ts) and hands each operation to the
 * module that does it: read.ts, insert.ts, transition.ts, write-batch.ts, claim.ts, leases.ts,
 * signals.ts, run-events.ts, approvals.ts, retention.ts, workflows.ts, idempotency.ts, transaction.ts.
 */
export class SqliteStore implements Store {
  readonly dialect = 'sqlite' as const;
  /** One synchronous connection: batches are written one after the other. */
  readonly parallelWrites = 1;
  readonly description: string;
  readonly path: string;
  readonly #c: SqliteContext;
  readonly #now: () => number;
  #transactions: SqliteTransactions | undefined;
  #idempotency: SqliteIdempotency | undefined;
  /** Commits of other connections (other processes), heard by `subscribe`. */
  readonly #watch = new CommitWatch(() => this.#c.db);

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path;
    this.description = `sqlite:${path} (synchronous=${options.synchronous ?? 'FULL'})`;
    this.#c = new SqliteContext(path, options);
    this.#now = options.now ?? Date.now;
  }

  /** The underlying better-sqlite3 handle (for tests and for writes that must share a transaction). */
  get db(): Database.Database {
    return this.#c.db;
  }

  /**
   * Applies the migrations. Processes that open a new file at once wait for each other's write
   * lock; SQLite reports some waits as SQLITE_BUSY without its busy handler (a connection running
   * WAL recovery, or closing and removing the log), so a busy migration is tried again for up to
   * {@link MIGRATE_BUSY_MS}: it is one transaction that skips what is applied.
   */
  async migrate(): Promise<void> {
    const until = Date.now() + MIGRATE_BUSY_MS;
    for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
      try {
        migrateSqlite(this.db, this.#now());
        return;
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (!code?.startsWith('SQLITE_BUSY') || Date.now() + wait > until) throw this.#c.storeError(e);
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /**
   * Wake-ups from other processes: when another connection has committed to the file, subscribers
   * hear that anything may have changed (`taskId: '*'`; see `commit-watch.ts`). A database in
   * memory has no other connection: no subscription.
   */
  async subscribe(listener: (event: WakeEvent) => void, topic: WakeTopic = 'work'): Promise<(() => Promise<void>) | null> {
    if (this.path === ':memory:' || !this.#c.open) return null;
    return this.#watch.add(listener, topic);
  }

  async close(): Promise<void> {
    if (!this.#c.open) return;
    this.#watch.stop();
    this.#transactions?.close();
    this.#c.close();
  }

  async insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
    return insertTask(this.#c, task);
  }

  async insertTasks(tasks: readonly NewTask[]): Promise<Array<{ task: TaskRow; created: boolean }>> {
    return insertTasks(this.#c, tasks);
  }

  async startDebounced(task: NewTask, write: DebounceWrite): Promise<{ task: TaskRow; created: boolean }> {
    return keyed.startDebounced(this.#c, task, write);
  }
  async startSingleton(task: NewTask): Promise<SingletonAnswer> {
    return keyed.startSingleton(this.#c, task);
  }

  async liveSingleton(workflow: string, key: string): Promise<TaskRow | null> {
    return keyed.liveSingleton(this.#c, workflow, key);
  }

  async unclaimedDebounced(workflow: string, key: string): Promise<TaskRow | null> {
    return keyed.unclaimedDebounced(this.#c, workflow, key);
  }

  async getTask(id: string): Promise<TaskRow | null> {
    return getTask(this.#c, id);
  }

  async queuePosition(task: TaskRow, now: number): Promise<QueuePosition> {
    return queuePosition(this.#c, task, now);
  }

  async getTasks(ids: readonly string[]): Promise<TaskRow[]> {
    return getTasks(this.#c, ids);
  }

  async findTaskByKey(key: string): Promise<TaskRow | null> {
    return byKey(this.#c, key);
  }

  async setTags(taskId: string, change: TagChange): Promise<Record<string, string> | 'too-many' | null> {
    return setTags(this.#c, taskId, change);
  }

  async forkTask(task: NewTask & { forkedFrom: string }, seqs: readonly number[]): Promise<TaskRow> {
    return forkTask(this.#c, task, seqs);
  }

  readonly putBlobs = async (w: BlobWrite): Promise<void> => blobs.putBlobs(this.#c, w);
  readonly putBlobsNow = (w: BlobWrite): void => blobs.putBlobs(this.#c, w);
  readonly touchBlobs = async (w: BlobTouch): Promise<Set<string>> => blobs.touchBlobs(this.#c, w);
  readonly getBlobs = async (hashes: readonly string[]): Promise<Map<string, StoredBlob>> => blobs.getBlobs(this.#c, hashes);
  readonly getBlobsNow = (hashes: readonly string[]): Map<string, StoredBlob> => blobs.getBlobs(this.#c, hashes);
  readonly shareBlobs = async (from: string, to: string): Promise<void> => blobs.shareBlobs(this.#c, from, to);
  readonly collectBlobs = async (before: number, limit: number): Promise<CollectedBlob[]> => blobs.collectBlobs(this.#c, before, limit);
  readonly blobUsage = async (): Promise<BlobUsage> => blobs.blobUsage(this.#c);
  readonly insertAlert = async (row: AlertRow): Promise<void> => alerts.insertAlert(this.#c, row);
  readonly listAlerts = async (q: AlertQuery): Promise<AlertRow[]> => alerts.listAlerts(this.#c, q);
  readonly purgeAlerts = async (before: number, limit: number): Promise<number> => alerts.purgeAlerts(this.#c, before, limit);
  async listTasks(q: ListQuery): Promise<TaskRow[]> {
    return listTasks(this.#c, q);
  }

  async getSteps(taskId: string): Promise<StepRow[]> {
    return getSteps(this.#c, taskId);
  }

  async getEvents(taskId: string, after = 0, limit?: number): Promise<EventRow[]> {
    return getEvents(this.#c, taskId, after, limit);
  }

  async getEventsOfType(taskId: string, types: readonly string[]): Promise<EventRow[]> {
    return getEventsOfType(this.#c, taskId, types);
  }

  async getEventRanges(ranges: readonly EventRange[]): Promise<EventRow[][]> {
    return getEventRanges(this.#c, ranges);
  }

  async readLog(after: string | null, limit: number): Promise<LogPage> {
    return readLog(this.#c, after, limit);
  }

  /** Every committed entry is readable at once: no mark to wait for. */
  async logMark(): Promise<string | null> {
    return null;
  }

  readonly getSignalByKey = async (taskId: string, idempotencyKey: string): Promise<SignalRow | undefined> => getSignalByKey(this.#c, taskId, idempotencyKey);
  readonly pendingSignals = async (taskId: string, afterId: number): Promise<SignalRow[]> => pendingSignals(this.#c, taskId, afterId);

  async getSignals(taskId: string): Promise<SignalRow[]> {
    return getSignals(this.#c, taskId);
  }

  async transition(write: TransitionWrite): Promise<TaskRow | null> {
    return transition(this.#c, write);
  }

  async writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    return writeBatchNow(this.#c, ops);
  }

  writeBatchNow(ops: readonly WriteOp[]): WriteResult[] {
    return writeBatchNow(this.#c, ops);
  }

  async claim(r: ClaimRequest): Promise<ClaimedTask[]> {
    return claim(this.#c, r);
  }

  async appendRunEvents(w: RunEventsWrite): Promise<boolean> {
    return appendRunEvents(this.#c, w);
  }

  async appendChunks(w: ChunksWrite): Promise<boolean> {
    return appendChunks(this.#c, w);
  }

  async getChunks(taskId: string, after: number, limit: number): Promise<StreamChunkRow[]> {
    return getChunks(this.#c, taskId, after, limit);
  }

  async deleteChunks(taskId: string, step: string): Promise<void> {
    deleteChunks(this.#c, taskId, step);
  }
  async purgeChunks(endedBefore: number, limit: number): Promise<number> {
    return purgeChunks(this.#c, endedBefore, limit);
  }

  async setProgress(taskId: string, epoch: number, progress: string): Promise<boolean> {
    return setProgress(this.#c, taskId, epoch, progress);
  }

  async heartbeat(r: HeartbeatRequest): Promise<HeldTask[]> {
    return heartbeat(this.#c, r);
  }

  async nextRunAt(r: NextRunRequest): Promise<number | null> {
    return nextRunAt(this.#c, r);
  }

  async releaseHeld(now: number): Promise<number> {
    return releaseHeld(this.#c, now);
  }

  async leaseOwners(now: number): Promise<string[]> {
    return leaseOwners(this.#c, now);
  }

  async endLeasesOf(owner: string, now: number): Promise<number> {
    return endLeasesOf(this.#c, owner, now);
  }

  async expireLeases(r: ExpireRequest): Promise<number> {
    return expireLeases(this.#c, r);
  }

  async insertSignal(s: SignalWrite): Promise<SignalInsert | null> {
    return insertSignal(this.#c, s);
  }

  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>): Promise<{ value: T; accepted: boolean }> {
    const c = this.#c;
    try {
      c.checkFiles();
    } catch (e) {
      return Promise.reject(e);
    }
    this.#transactions ??= new SqliteTransactions(
      () => openSqlite(this.path, c.options),
      (e) => c.storeError(e),
    );
    return this.#transactions.runInTransaction(fn, checkpoint);
  }

  idempotencyRecords(): IdempotencyBackend {
    const c = this.#c;
    return (this.#idempotency ??= new SqliteIdempotency(
      () => c.db,
      (fn) => c.tx(fn),
    ));
  }

  async appendTaskEvents(taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean> {
    return appendTaskEvents(this.#c, taskId, at, entries);
  }

  async insertApproval(w: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null> {
    return approvals.insertApproval(this.#c, w);
  }

  async getApproval(id: string): Promise<ApprovalRow | null> {
    return this.#c.translate(() => approvals.getApproval(this.#c, id));
  }

  async listApprovals(q: ApprovalQuery): Promise<ApprovalRow[]> {
    return this.#c.translate(() => approvals.listApprovals(this.#c, q));
  }

  async updateApproval(w: ApprovalUpdate): Promise<ApprovalRow | null> {
    return approvals.updateApproval(this.#c, w);
  }

  async appendEvents(w: LogAppend): Promise<boolean> {
    return approvals.appendEvents(this.#c, w);
  }

  async deleteTasks(deletion: TaskSelection, limit: number, note?: DeletionNote): Promise<DeletedTask[]> {
    const gone = this.#c.tx(() => retention.deleteTasks(this.#c, deletion, limit, note));
    for (const t of gone) this.#c.forget(t.id, t.no);
    return gone.map(({ id, workflow, status }) => ({ id, workflow, status }));
  }

  async countTasks(selection: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>> {
    return this.#c.translate(() => retention.countTasks(this.#c, selection, cap));
  }

  async claimDeletions(now: number, leaseMs: number, limit: number): Promise<DeletionRecord[]> {
    return this.#c.tx(() => retention.claimDeletions(this.#c, now, leaseMs, limit));
  }

  async ackDeletions(taskIds: readonly string[]): Promise<void> {
    this.#c.tx(() => retention.ackDeletions(this.#c, taskIds));
  }

  readonly recordPresence = async (presence: WorkerPresence, forgetBefore: number): Promise<void> => recordPresence(this.#c, presence, forgetBefore);
  readonly removePresence = async (workerId: string): Promise<void> => removePresence(this.#c, workerId);
  readonly servedVersions = async (workflow: string, seenSince: number): Promise<string[]> => servedVersions(this.#c, workflow, seenSince);

  async registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void> {
    registerWorkflows(this.#c, workflows);
  }

  async listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>> {
    return listWorkflows(this.#c);
  }

  async putSchedule(d: ScheduleDefinition, nextAt: number | null, at: number): Promise<{ row: ScheduleRow; created: boolean }> {
    return schedules.putSchedule(this.#c, d, nextAt, at);
  }

  async getSchedule(id: string): Promise<ScheduleRow | null> {
    return schedules.getSchedule(this.#c, id);
  }

  async listSchedules(q: { after?: string; limit: number; workflow?: string }): Promise<ScheduleRow[]> {
    return schedules.listSchedules(this.#c, q);
  }

  async dueSchedules(now: number, limit: number): Promise<ScheduleRow[]> {
    return schedules.dueSchedules(this.#c, now, limit);
  }

  async advanceSchedule(a: ScheduleAdvance): Promise<boolean> {
    return schedules.advanceSchedule(this.#c, a);
  }

  async setSchedulePaused(id: string, paused: boolean, nextAt: number | null, at: number): Promise<ScheduleRow | null> {
    return schedules.setSchedulePaused(this.#c, id, paused, nextAt, at);
  }

  async nextScheduleAt(): Promise<number | null> {
    return schedules.nextScheduleAt(this.#c);
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return schedules.deleteSchedule(this.#c, id);
  }

  async drawRate(r: RateDrawRequest): Promise<RateDraw> {
    return rateLimits.drawRate(this.#c, r);
  }

  async settleRate(id: number, tokens: number): Promise<void> {
    return rateLimits.settleRate(this.#c, id, tokens);
  }
}
