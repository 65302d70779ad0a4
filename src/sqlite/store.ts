/**
 * @module sqlite/store
 * The embedded store: one SQLite file (WAL), shared by any number of worker processes on one
 * machine. better-sqlite3 is synchronous, so every method runs to completion before it returns;
 * every write runs in a `BEGIN IMMEDIATE` transaction, which takes the file's write lock up front
 * (a deferred transaction that upgrades to a writer could fail with SQLITE_BUSY instead of waiting).
 */
import type Database from 'better-sqlite3';
import { openSqlite, type SqliteOptions } from './connection.ts';
import { migrateSqlite } from './migrate.ts';
import { SqliteIdempotency } from './idempotency.ts';
import { SqliteTransactions } from './transaction.ts';
import type { Transaction } from '../transaction-types.ts';
import type { IdempotencyBackend } from '../idempotency/records.ts';
import * as approvals from './approvals.ts';
import * as retention from './retention.ts';
import { capsOf, nextWindow, servedSet, subtractLeased, takeWindow, type PickedTask } from '../claim-plan.ts';
import { LEASED_STATUSES, isTaskStatus, type TaskStatus } from '../lifecycle.ts';
import { ClosedError, InvalidArgumentError, StoreRefusedError, StoreUnavailableError } from '../errors.ts';
import {
  STEP_COLUMNS, encodeEvents, isRaw, patchAssignments, stepValuesOfTask, toEventRow, toSignalRow, toStepRow, toTaskRow, toChunkRow,
} from '../rows.ts';
import { decodeEvents } from '../task-columns.ts';
import { RESULT_ENTRY_TYPES_SQL, claimersOf, journalCarries, mergeLog, signalConsumedEntry, signalReceivedEntry, stepEntry, stepEntryAt, transitionEntry, transitionWriteEntries, uniqueSteps } from '../log-entries.ts';
import type {
  ApprovalInsert, ApprovalQuery, ApprovalRow, ApprovalUpdate, LogAppend, DeletedTask, TaskSelection, SignalInsert,
  ClaimRequest, ClaimedTask, EventRange, EventRow, ExpireRequest, HeartbeatRequest, HeldTask, ListQuery, LogPage, NewEvent, NewTask, NextRunRequest, RunEventsWrite, ChunksWrite, StreamChunkRow,
  SignalRow, SignalWrite, StepRow, StepWrite, Store, TaskPatch, TaskRow, TransitionWrite, WorkflowRegistration,
  WriteOp, WriteResult,
} from '../store.ts';

type Raw = Record<string, unknown>;

const inList = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
/**
 * Statuses as SQL literals (checked against the lifecycle's list): with literals, rather than
 * bound parameters, SQLite can prove that a query implies a partial index's WHERE clause and use it.
 */
export const statusList = (statuses: readonly TaskStatus[]): string =>
  statuses
    .map((s) => {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown task status "${String(s)}"`);
      return `'${s}'`;
    })
    .join(', ');
const LEASED_SQL = statusList(LEASED_STATUSES);
/** {@link statusList} of a transition's source statuses (one, mostly), remembered. */
const fromLists = new Map<string, string>();
const fromList = (from: readonly TaskStatus[]): string => {
  const key = from.length === 1 ? (from[0] as string) : from.join(',');
  let sql = fromLists.get(key);
  if (sql === undefined) fromLists.set(key, (sql = statusList(from)));
  return sql;
};
/** How many task id → internal key entries a connection keeps (see `#rememberNo`). */
const TASK_NO_CACHE = 10_000;
/** The WHERE clauses of the partial indexes for claims (sql/sqlite/000001_init.sql). */
const DUE_INDEX: readonly TaskStatus[] = ['pending', 'waiting'];
const LEASED_INDEX: readonly TaskStatus[] = ['running', 'cancelling'];
/** How long a migration that finds the file busy is tried again (see `SqliteStore.migrate`). */
const MIGRATE_BUSY_MS = 30_000;
/** `(+workflow IN (…) OR (+workflow = ? AND workflow_version IN (…)) …)`: the workflows (and versions) a worker serves. */
function servedClause(workflows: readonly string[], versions: ClaimRequest['versions']): { sql: string; params: unknown[] } {
  const { any, pinned } = servedSet(workflows, versions);
  const parts: string[] = [];
  const params: unknown[] = [];
  if (any.length) {
    parts.push(`+workflow IN (${inList(any.length)})`);
    params.push(...any);
  }
  for (const [wf, vs] of pinned) {
    parts.push(`(+workflow = ? AND workflow_version IN (${inList(vs.length)}))`);
    params.push(wf, ...vs);
  }
  return { sql: `(${parts.join(' OR ')})`, params };
}

/**
 * `status IN (…)` for a claim query. SQLite uses a partial index only when the query repeats the
 * index's own WHERE term, so it is added when the statuses asked for are among the index's.
 */
const statusTerm = (statuses: readonly TaskStatus[], index: readonly TaskStatus[]): string =>
  statuses.every((s) => index.includes(s))
    ? `status IN (${statusList(index)}) AND status IN (${statusList(statuses)})`
    : `status IN (${statusList(statuses)})`;
const STEP_VALUE_COLUMNS = STEP_COLUMNS.slice(1); // the journal refers to its task by `task_no`
/** A journal row with the log seq of the entry it carries (or NULL), inserted or replaced. */
export const UPSERT_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq) VALUES (?, ${inList(STEP_VALUE_COLUMNS.length + 1)})
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/**
 * The hot path of a step result (a row that carries its log entry): fence and row in one
 * autocommit statement, its entry numbered from this connection's count of the task's log. The
 * count is right unless another connection appended to the task's log since (a command or a
 * signal: only the lease holder writes its journal), which shows as an entry at or past that seq:
 * then no row is written and the write is done again in a transaction that reads the log afresh.
 */
const HOT_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq)
  SELECT ?, ${inList(STEP_VALUE_COLUMNS.length)}, ? FROM stepwise_tasks
  WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL}) AND NOT EXISTS (SELECT 1 FROM stepwise_events WHERE task_no = ? AND seq >= ?)
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/**
 * A step result in a write transaction: the fence and the row in one statement (its entry's seq
 * taken from this connection's count, read afresh in the transaction: see {@link #takeSeqs}).
 */
const FENCED_RESULT_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq)
  SELECT ?, ${inList(STEP_VALUE_COLUMNS.length)}, ? FROM stepwise_tasks WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL})
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/** A journal row that is new (a transition's rows are mostly new: then nothing is read first). */
const INSERT_NEW_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq) VALUES (?, ${inList(STEP_VALUE_COLUMNS.length + 1)})
  ON CONFLICT (task_no, seq) DO NOTHING`;
/**
 * The fence of a checkpoint: the lease holder if the task is leased at the writer's epoch, else no
 * row. Fences name the task by its key and its id (a deleted task's key can be handed out again).
 */
export const FENCE_STEP_SQL = `SELECT lease_owner FROM stepwise_tasks WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL})`;
/** A task's last log seq, from both places entries are stored. */
export const LAST_SEQ_SQL = `SELECT max(coalesce((SELECT max(seq) FROM stepwise_events WHERE task_no = ?), 0),
  coalesce((SELECT max(log_seq) FROM stepwise_steps WHERE task_no = ?), 0)) AS n`;
/** {@link LAST_SEQ_SQL} of the row a statement on `stepwise_tasks` returns (as `last_seq`). */
const RETURNING_LAST_SEQ = `max(coalesce((SELECT max(seq) FROM stepwise_events WHERE task_no = stepwise_tasks.no), 0),
  coalesce((SELECT max(log_seq) FROM stepwise_steps WHERE task_no = stepwise_tasks.no), 0)) AS last_seq`;
/** A claim of one picked task: the row comes back with its log's last seq (see {@link RETURNING_LAST_SEQ}). */
const CLAIM_TASK_SQL = `UPDATE stepwise_tasks SET status = ?, lease_owner = ?, lease_expires_at = ?, epoch = epoch + 1,
    version = version + 1, runs = runs + 1, wait = NULL, wait_events = NULL, updated_at = ?
  WHERE id = ? RETURNING *, ${RETURNING_LAST_SEQ}`;
export const INSERT_EVENT_SQL = 'INSERT INTO stepwise_events (task_no, seq, at, type, actor_kind, actor_id, data) VALUES (?, ?, ?, ?, ?, ?, ?)';

export interface SqliteStoreOptions extends SqliteOptions {
  /** Clock for migration timestamps only; everything else gets "now" from the caller. */
  now?: () => number;
}

export class SqliteStore implements Store {
  readonly dialect = 'sqlite' as const;
  /** One synchronous connection: batches are written one after the other. */
  readonly parallelWrites = 1;
  readonly description: string;
  readonly path: string;
  #db: Database.Database | null;
  readonly #statements = new Map<string, Database.Statement>();
  /**
   * Task id → internal integer key, for the fenced writes of the runs this connection holds (a
   * leased task is never deleted). Reads look the key up afresh: a deleted task's key can be handed
   * out again.
   */
  readonly #taskNo = new Map<string, number>();
  readonly #now: () => number;
  readonly #options: SqliteOptions;
  /**
   * The last log seq of recently written tasks, valid while no other connection has written the
   * file: SQLite's `data_version` changes exactly when another connection commits, and then the
   * cache is dropped and seqs are read again (see {@link #takeSeqs}). A checkpoint so takes its
   * seq without a read or a write of its own, in the common case of one process per file.
   */
  readonly #lastSeq = new Map<number, number>();
  #dataVersion = -1;
  /** `data_version` was read in the write transaction under way (no other connection commits during one). */
  #seqsChecked = false;
  /** The checkpoint of a plain step in its own write transaction (built once: the hot path). */
  #stepTx: ((w: StepWrite) => boolean) & { immediate: (w: StepWrite) => boolean } | undefined;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path;
    this.description = `sqlite:${path} (synchronous=${options.synchronous ?? 'FULL'})`;
    this.#db = openSqlite(path, options);
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The underlying better-sqlite3 handle (for tests and for writes that must share a transaction). */
  get db(): Database.Database {
    if (!this.#db) throw new ClosedError('The SQLite store');
    return this.#db;
  }

  #stmt(sql: string): Database.Statement {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.#statements.set(sql, s);
    }
    return s;
  }

  /** The internal key of a task as it is now (no cache), or undefined if there is no such task. */
  #noNow(taskId: string): number | undefined {
    const row = this.#stmt('SELECT no FROM stepwise_tasks WHERE id = ?').get(taskId) as { no: number } | undefined;
    return row?.no;
  }

  /** The internal key of a task, remembered (see {@link #taskNo}), or undefined if there is no such task. */
  #no(taskId: string): number | undefined {
    let no = this.#taskNo.get(taskId);
    if (no === undefined) {
      const row = this.#stmt('SELECT no FROM stepwise_tasks WHERE id = ?').get(taskId) as { no: number } | undefined;
      if (!row) return undefined;
      no = row.no;
      this.#rememberNo(taskId, no);
    }
    return no;
  }

  /**
   * Caches a task's internal key. The cache holds the tasks this connection works on now; it is
   * emptied when it reaches its bound, so a worker that parks 100,000 tasks does not keep an entry
   * for each.
   */
  #rememberNo(taskId: string, no: number): void {
    if (this.#taskNo.size >= TASK_NO_CACHE) this.#taskNo.clear();
    this.#taskNo.set(taskId, no);
  }

  /** Runs `fn` in a `BEGIN IMMEDIATE` transaction; driver errors are translated here. */
  #tx<T>(fn: () => T): T {
    this.#seqsChecked = false;
    try {
      return this.#translate(() => this.db.transaction(fn).immediate());
    } catch (e) {
      this.#lastSeq.clear(); // seqs taken by a transaction that rolled back were not used
      throw e;
    } finally {
      this.#seqsChecked = false;
    }
  }

  /**
   * Drops the cached seqs if another connection committed since they were taken. Once per write
   * transaction: while it holds the write lock no other connection can commit.
   */
  #checkSeqs(): void {
    if (this.#seqsChecked) return;
    this.#seqsChecked = true;
    const version = this.#stmt('PRAGMA data_version').pluck().get() as number;
    if (version !== this.#dataVersion) {
      this.#lastSeq.clear();
      this.#dataVersion = version;
    }
  }

  /** The last seq of task `no`'s log, as known in this write transaction (read if unknown). */
  #lastSeqOf(no: number): number {
    this.#checkSeqs();
    let last = this.#lastSeq.get(no);
    if (last === undefined) {
      last = Number((this.#stmt(LAST_SEQ_SQL).get(no, no) as { n: number }).n);
      this.#knowSeq(no, last);
    }
    return last;
  }

  #knowSeq(no: number, last: number): void {
    if (this.#lastSeq.size >= 10_000 && !this.#lastSeq.has(no)) this.#lastSeq.clear();
    this.#lastSeq.set(no, last);
  }

  /**
   * Takes `n` seqs of task `no`'s log; returns the last. Inside a write transaction (one writer at
   * a time, so no other connection can take seqs of the same task until it commits).
   */
  #takeSeqs(no: number, n: number): number {
    const last = this.#lastSeqOf(no) + n;
    this.#lastSeq.set(no, last);
    return last;
  }

  /**
   * The one place where SQLite errors become Stepwise errors: a file that stays locked past the
   * busy timeout, a full or read-only disk, an I/O error: the store is unavailable (retryable).
   * Other errors are bugs and pass through unchanged.
   */
  #translate<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      throw this.#storeError(e);
    }
  }

  /** A driver error as the engine sees it: a busy, locked or failing file is StoreUnavailableError (retryable). */
  #storeError(e: unknown): unknown {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|FULL|READONLY|CANTOPEN|PROTOCOL)/.test(code)) {
      return new StoreUnavailableError(`SQLite database ${this.path} is unavailable (${code}): ${(e as Error).message}`, { cause: e });
    }
    if (typeof code === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(code)) {
      return new StoreUnavailableError(`The SQLite database ${this.path} is damaged (${code}): ${(e as Error).message}. Restore it from a backup.`, { cause: e });
    }
    // Refused for the content of the write (a constraint, a value too big): the same write fails again.
    if (typeof code === 'string' && /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code)) {
      return new StoreRefusedError(`SQLite database ${this.path} refused a write (${code}): ${(e as Error).message}. Retrying cannot fix this.`, { cause: e, dbCode: code });
    }
    return e;
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
        if (!code?.startsWith('SQLITE_BUSY') || Date.now() + wait > until) throw this.#storeError(e);
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  async close(): Promise<void> {
    if (!this.#db) return;
    this.#transactions?.close();
    this.#statements.clear();
    this.#db.close();
    this.#db = null;
  }

  async insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
    return this.#tx(() => this.#insert(task));
  }

  async insertTasks(tasks: readonly NewTask[]): Promise<Array<{ task: TaskRow; created: boolean }>> {
    // One transaction, one commit (one sync) for the whole batch; a key taken by an earlier task of
    // the batch is found by the same lookup as one taken before it.
    return tasks.length ? this.#tx(() => tasks.map((task) => this.#insert(task))) : [];
  }

  #insert(task: NewTask): { task: TaskRow; created: boolean } {
    const row = this.#stmt(
      `INSERT INTO stepwise_tasks (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at, usage, deadline_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
    ).get(task.id, task.workflow, task.workflowVersion, task.status, task.input, task.idempotencyKey, task.runAt, task.createdAt, task.createdAt, task.usage ?? null, task.deadlineAt ?? null) as Raw | undefined;
    if (row) {
      // A new row's log is empty (a deleted task's key may be handed out again, but its log went with it).
      this.#checkSeqs();
      this.#knowSeq(Number(row.no), 0);
      this.#append(Number(row.no), task.createdAt, [task.log]);
      return { task: toTaskRow(row), created: true };
    }
    return { task: this.#byKey(task.idempotencyKey as string) as TaskRow, created: false };
  }

  async getTask(id: string): Promise<TaskRow | null> {
    const row = this.#stmt('SELECT * FROM stepwise_tasks WHERE id = ?').get(id) as Raw | undefined;
    return row ? toTaskRow(row) : null;
  }

  async getTasks(ids: readonly string[]): Promise<TaskRow[]> {
    const get = this.#stmt('SELECT * FROM stepwise_tasks WHERE id = ?');
    const out: TaskRow[] = [];
    for (const id of new Set(ids)) {
      const row = get.get(id) as Raw | undefined;
      if (row) out.push(toTaskRow(row));
    }
    return out;
  }

  async findTaskByKey(key: string): Promise<TaskRow | null> {
    return this.#byKey(key);
  }

  #byKey(key: string): TaskRow | null {
    const row = this.#stmt('SELECT * FROM stepwise_tasks WHERE idempotency_key = ?').get(key) as Raw | undefined;
    return row ? toTaskRow(row) : null;
  }

  async listTasks(q: ListQuery): Promise<TaskRow[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (q.statuses?.length) {
      where.push(`status IN (${statusList(q.statuses)})`);
    }
    if (q.workflow !== undefined) {
      where.push('workflow = ?');
      params.push(q.workflow);
    }
    if (q.before !== undefined) {
      where.push('id < ?');
      params.push(q.before);
    }
    const sql = `SELECT * FROM stepwise_tasks ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`;
    return (this.#stmt(sql).all(...params, q.limit) as Raw[]).map(toTaskRow);
  }

  async getSteps(taskId: string): Promise<StepRow[]> {
    const no = this.#noNow(taskId);
    return no === undefined ? [] : this.#steps(taskId, no);
  }

  #steps(taskId: string, no: number): StepRow[] {
    return (this.#stmt('SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? ORDER BY seq').all(taskId, no) as Raw[]).map(toStepRow);
  }

  async getEvents(taskId: string, after = 0, limit?: number): Promise<EventRow[]> {
    // One read transaction, one snapshot: a write of another process between the two reads could
    // otherwise hide an entry (a retry moving one from its row to the table).
    return this.#translate(() => this.db.transaction(() => {
      const no = this.#noNow(taskId);
      return no === undefined ? [] : this.#log(taskId, no, after, limit);
    })());
  }

  async getEventRanges(ranges: readonly EventRange[]): Promise<EventRow[][]> {
    // One read transaction for all of them, as for one task.
    return this.#translate(() => this.db.transaction(() => ranges.map((r) => {
      if (r.before <= r.after + 1) return [];
      const no = this.#noNow(r.taskId);
      if (no === undefined) return [];
      return this.#log(r.taskId, no, r.after, r.before - r.after - 1).filter((e) => e.seq < r.before);
    }))());
  }

  /** A task's log after `after`, at most `limit` entries (in a read transaction of the caller's). */
  #log(taskId: string, no: number, after: number, limit: number | undefined): EventRow[] {
    const own = (this.#stmt('SELECT ? AS task_id, * FROM stepwise_events WHERE task_no = ? AND seq > ? ORDER BY seq LIMIT ?').all(
      taskId, no, after, limit ?? -1,
    ) as Raw[]).map(toEventRow);
    const carried = (this.#stmt('SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? AND log_seq > ? ORDER BY log_seq LIMIT ?').all(
      taskId, no, after, limit ?? -1,
    ) as Raw[]).map((r) => ({ step: toStepRow(r), logSeq: Number(r.log_seq) }));
    return mergeLog(taskId, own, carried, carried.length ? this.#claimers(no) : new Map(), limit);
  }

  /**
   * The log of every task in `id` order. Writers take the file's write lock one at a time and a
   * row's id is max(id) + 1 when it is inserted, so ids are assigned in commit order: a reader
   * that resumes after the last id it saw misses nothing. The cursor is that id, as text. Step
   * results moved out of journal rows are left out, and each row says its task's previous one (see `LogPage`).
   */
  async readLog(after: string | null, limit: number): Promise<LogPage> {
    const from = after === null ? 0 : Number(after);
    if (!Number.isSafeInteger(from)) throw new InvalidArgumentError(`Invalid log cursor "${after}"`);
    const rows = this.#translate(() => this.#stmt(
      `SELECT e.id, t.id AS task_id, e.seq, e.at, e.type, e.actor_kind, e.actor_id, e.data,
         coalesce((SELECT p.seq FROM stepwise_events p WHERE p.task_no = e.task_no AND p.seq < e.seq AND p.id < e.id
           AND p.type NOT IN (${RESULT_ENTRY_TYPES_SQL}) ORDER BY p.seq DESC LIMIT 1), 0) AS prev_seq
       FROM stepwise_events e JOIN stepwise_tasks t ON t.no = e.task_no WHERE e.id > ? AND e.type NOT IN (${RESULT_ENTRY_TYPES_SQL}) ORDER BY e.id LIMIT ?`,
    ).all(from, limit)) as Raw[];
    const last = rows.at(-1);
    return { events: rows.map((r) => ({ ...toEventRow(r), cursor: String(r.id), prevSeq: Number(r.prev_seq) })), cursor: last ? String(last.id) : after, behind: false };
  }

  /** Every committed entry is readable at once: no mark to wait for. */
  async logMark(): Promise<string | null> {
    return null;
  }

  async getSignals(taskId: string): Promise<SignalRow[]> {
    return (this.#stmt('SELECT * FROM stepwise_signals WHERE task_id = ? ORDER BY id').all(taskId) as Raw[]).map(toSignalRow);
  }

  /**
   * Appends entries to task `no`'s log, numbered after its last one (inside a write transaction).
   * Returns the seq given to each entry; an entry carried by a journal row (`carriedBy`) is not
   * written here: the caller stores its seq on that row.
   */
  #append(no: number, at: number, entries: readonly NewEvent[]): number[] {
    if (!entries.length) return [];
    const last = this.#takeSeqs(no, entries.length);
    this.#insertEntries(no, at, entries, last);
    return entries.map((_e, i) => last - entries.length + 1 + i);
  }

  /** Writes `entries` (but those carried by journal rows) with the seqs up to `last`. */
  #insertEntries(no: number, at: number, entries: readonly NewEvent[], last: number): void {
    const insert = this.#stmt(INSERT_EVENT_SQL);
    entries.forEach((e, i) => {
      if (e.carriedBy === undefined) insert.run(no, last - entries.length + 1 + i, at, e.type, e.actorKind, e.actorId, e.data);
    });
  }

  /**
   * Before journal rows at `seqs` are deleted or rewritten, the entries they carry become entries
   * of their own (same seq), so the log keeps them: it is append-only.
   */
  #materialize(no: number, taskId: string, seqs: readonly number[]): void {
    if (!seqs.length) return;
    const rows = (this.#stmt(`SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? AND log_seq IS NOT NULL AND seq IN (${inList(seqs.length)})`)
      .all(taskId, no, ...seqs) as Raw[]);
    if (!rows.length) return;
    const claimers = this.#claimers(no);
    const insert = this.#stmt(INSERT_EVENT_SQL);
    for (const r of rows) {
      const step = toStepRow(r);
      const entry = stepEntry('worker', claimers.get(step.epoch) ?? 'unknown', step);
      insert.run(no, Number(r.log_seq), stepEntryAt(step), entry.type, entry.actorKind, entry.actorId, entry.data);
    }
    this.#stmt(`UPDATE stepwise_steps SET log_seq = NULL WHERE task_no = ? AND seq IN (${inList(seqs.length)})`).run(no, ...seqs);
  }

  /** The worker that took each lease epoch of task `no` (the writer of that epoch's journal rows). */
  #claimers(no: number): Map<number, string> {
    const rows = this.#stmt("SELECT actor_id, data FROM stepwise_events WHERE task_no = ? AND type = 'transition' AND actor_kind = 'worker'").all(no) as Raw[];
    return claimersOf(rows.map((r) => ({ actorKind: 'worker', actorId: String(r.actor_id), data: r.data === null ? null : String(r.data) })));
  }

  async transition(write: TransitionWrite): Promise<TaskRow | null> {
    return this.#tx(() => this.#transition(write));
  }

  #transition(w: TransitionWrite): TaskRow | null {
    // The guard (legal source status, version or epoch, pause request) is the UPDATE's own WHERE.
    const { sets, params } = this.#assignments(w.set, w.at);
    const guard = 'version' in w.guard ? 'version' : 'epoch';
    const pause = w.pauseRequested === undefined ? '' : ' AND pause_requested = ?';
    const row = this.#stmt(
      `UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets}
       WHERE id = ? AND status IN (${fromList(w.from)}) AND ${guard} = ?${pause} RETURNING *`,
    ).get(w.to, w.at, ...params, w.taskId, 'version' in w.guard ? w.guard.version : w.guard.epoch, ...(pause ? [w.pauseRequested ? 1 : 0] : [])) as Raw | undefined;
    if (!row) return null;
    const no = Number(row.no);
    const steps = uniqueSteps(w.steps ?? []);
    // Rows about to be deleted keep their entries in the log first (as do rows rewritten, below).
    if (w.deleteSteps?.length) {
      this.#materialize(no, w.taskId, w.deleteSteps);
      this.#stmt(`DELETE FROM stepwise_steps WHERE task_no = ? AND seq IN (${inList(w.deleteSteps.length)})`).run(no, ...w.deleteSteps);
    }
    const entries = transitionWriteEntries(w);
    const last = entries.length ? this.#takeSeqs(no, entries.length) : 0;
    const carried = new Map<number, number>();
    entries.forEach((e, i) => e.carriedBy !== undefined && carried.set(e.carriedBy, last - entries.length + 1 + i));
    for (const step of steps) {
      const logSeq = carried.get(step.seq) ?? null;
      // Most rows are new; one that exists keeps the entry it carries in the log before it is rewritten.
      if (this.#stmt(INSERT_NEW_STEP_SQL).run(no, ...stepValuesOfTask(step), logSeq).changes === 1) continue;
      this.#materialize(no, w.taskId, [step.seq]);
      this.#upsertStep(no, step, logSeq);
    }
    this.#insertEntries(no, w.at, entries, last);
    for (const c of w.consume ?? []) this.#consume(c.signalId, c.seq);
    const events = encodeEvents(w.set.waitEvents ?? null);
    if (events !== null) {
      const due = this.#stmt(
        `UPDATE stepwise_tasks SET run_at = ? WHERE id = ? AND EXISTS
           (SELECT 1 FROM stepwise_signals WHERE task_id = ? AND consumed_seq IS NULL AND instr(?, '|' || name || '|') > 0) RETURNING *`,
      ).get(w.at, w.taskId, w.taskId, events) as Raw | undefined;
      if (due) return toTaskRow(due);
    }
    return toTaskRow(row);
  }

  /** `, col = ?, …` for a patch, and its parameters; `now`: the store's time (the engine's clock). */
  #assignments(patch: TaskPatch, now: number): { sets: string; params: unknown[] } {
    let sets = '';
    const params: unknown[] = [];
    for (const [col, value] of patchAssignments(patch, (b) => (b ? 1 : 0), now)) {
      if (isRaw(value)) sets += `, ${col} = ${value.raw}`;
      else {
        sets += `, ${col} = ?`;
        params.push(value);
      }
    }
    return { sets, params };
  }

  #upsertStep(no: number, step: StepRow, logSeq: number | null): void {
    this.#stmt(UPSERT_STEP_SQL).run(no, ...stepValuesOfTask(step), logSeq);
  }

  #consume(signalId: number, seq: number): void {
    this.#stmt('UPDATE stepwise_signals SET consumed_seq = ? WHERE id = ? AND consumed_seq IS NULL').run(seq, signalId);
  }

  /**
   * The fenced journal write: accepted only while the writer's epoch is current and the task
   * leased. A step's result is carried by its row (one row written); a wait in progress or a retry
   * due also gets an entry of its own, since the row will be written again.
   */
  #stepWrite(w: StepWrite): boolean {
    const s = w.step;
    const no = this.#no(w.taskId);
    if (no === undefined || s.taskId !== w.taskId) return false;
    if (!w.consume && journalCarries(s)) {
      // A result: fence and row in one statement; the seq is taken only if the row was written.
      const seq = this.#lastSeqOf(no) + 1;
      if (this.#stmt(FENCED_RESULT_SQL).run(no, ...stepValuesOfTask(s), seq, no, w.taskId, w.epoch).changes !== 1) return false;
      this.#lastSeq.set(no, seq);
      return true;
    }
    const fence = this.#stmt(FENCE_STEP_SQL).get(no, w.taskId, w.epoch) as { lease_owner: string | null } | undefined;
    if (!fence) return false;
    const seq = this.#takeSeqs(no, 1);
    const carried = journalCarries(s);
    this.#upsertStep(no, s, carried ? seq : null);
    if (!carried) {
      const entry = stepEntry('worker', fence.lease_owner ?? 'unknown', s);
      this.#stmt(INSERT_EVENT_SQL).run(no, seq, stepEntryAt(s), entry.type, entry.actorKind, entry.actorId, entry.data);
    }
    if (w.consume) {
      this.#consume(w.consume.signalId, w.consume.seq);
      this.#append(no, stepEntryAt(s), [signalConsumedEntry('worker', fence.lease_owner ?? 'unknown', w.consume)]);
    }
    return true;
  }

  /**
   * A step result written by one autocommit statement (see {@link HOT_STEP_SQL}); false when it
   * was not written (not a result, the task's log count unknown here, the fence or the count
   * refused it): the caller then writes it in a transaction, which also tells the fence apart.
   */
  #hotStep(w: StepWrite): boolean {
    const s = w.step;
    if (!journalCarries(s) || s.taskId !== w.taskId) return false;
    const no = this.#taskNo.get(w.taskId);
    const last = no === undefined ? undefined : this.#lastSeq.get(no);
    if (no === undefined || last === undefined) return false;
    const seq = last + 1;
    if (this.#stmt(HOT_STEP_SQL).run(no, ...stepValuesOfTask(s), seq, no, w.taskId, w.epoch, no, seq).changes !== 1) return false;
    this.#lastSeq.set(no, seq);
    return true;
  }

  async writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    return this.writeBatchNow(ops);
  }

  writeBatchNow(ops: readonly WriteOp[]): WriteResult[] {
    const [only] = ops;
    // The hot path of a plain step: the fence and the row, in one write transaction.
    if (ops.length === 1 && only?.kind === 'step' && !only.consume) {
      try {
        if (this.#hotStep(only)) return [true];
        this.#stepTx ??= this.db.transaction((w: StepWrite) => this.#stepWrite(w));
        this.#seqsChecked = false;
        return [this.#stepTx.immediate(only)];
      } catch (e) {
        this.#lastSeq.clear();
        throw this.#storeError(e);
      } finally {
        this.#seqsChecked = false;
      }
    }
    return this.#tx(() => ops.map((op) => (op.kind === 'step' ? this.#stepWrite(op) : this.#transition(op))));
  }

  async claim(r: ClaimRequest): Promise<ClaimedTask[]> {
    if (r.limit <= 0 || r.workflows.length === 0) return [];
    return this.#tx(() => {
      const picked: PickedTask[] = [];
      const room = this.#room(r);
      // Candidates are read a window at a time; a workflow at its concurrency cap is left out of
      // the next window, so a capped backlog never hides other workflows' tasks.
      const pick = (event: 'claim' | 'reclaim', from: readonly TaskStatus[], index: readonly TaskStatus[], due: string, order: string): void => {
        if (!from.length) return;
        for (;;) {
          const window = nextWindow(r, picked, room);
          if (!window) return;
          const served = servedClause(window.allowed, r.versions);
          const taken = picked.map((p) => p.id);
          // `+workflow` keeps the planner off the workflow index, which would walk a workflow's
          // whole history; the status term lets it use the partial index of due (or expired) tasks.
          const rows = this.#stmt(
            `SELECT id, status, workflow, lease_owner FROM stepwise_tasks
             WHERE ${statusTerm(from, index)} AND ${due} <= ? AND ${served.sql}
             ${taken.length ? `AND id NOT IN (${inList(taken.length)})` : ''}
             ORDER BY ${order} LIMIT ?`,
          ).all(r.now, ...served.params, ...taken, window.need) as Raw[];
          if (!takeWindow(rows, window.need, event, room, picked)) return;
        }
      };
      // Expired leases first: their tasks have waited longest.
      pick('reclaim', r.reclaim.from, LEASED_INDEX, 'lease_expires_at', 'lease_expires_at, id');
      pick('claim', r.claim.from, DUE_INDEX, 'run_at', 'run_at, id');
      const expires = r.now + r.leaseMs;
      // Pending signals of all picked tasks in one query (a task may be signalled before its first run).
      const signalsBy = new Map<string, SignalRow[]>();
      if (picked.length) {
        const pending = this.#stmt(
          `SELECT * FROM stepwise_signals WHERE task_id IN (${inList(picked.length)}) AND consumed_seq IS NULL ORDER BY id`,
        ).all(...picked.map((p) => p.id)) as Raw[];
        for (const raw of pending) {
          const signal = toSignalRow(raw);
          signalsBy.set(signal.taskId, [...(signalsBy.get(signal.taskId) ?? []), signal]);
        }
      }
      if (picked.length) this.#checkSeqs();
      return picked.map((p) => {
        const to = p.event === 'claim' ? r.claim.to : r.reclaim.to[p.status];
        if (to === undefined) throw new Error(`claim: no reclaim target for status ${p.status}`);
        // The row comes back with its log's last seq, for the claim's entry and the run's checkpoints.
        const raw = this.#stmt(CLAIM_TASK_SQL).get(to, r.workerId, expires, r.now, p.id) as Raw;
        this.#rememberNo(p.id, Number(raw.no));
        this.#knowSeq(Number(raw.no), Number(raw.last_seq));
        const row = toTaskRow(raw);
        const detail = p.event === 'reclaim' ? JSON.stringify({ previousOwner: p.leaseOwner }) : null;
        this.#append(Number(raw.no), r.now, [transitionEntry('worker', r.workerId, { event: p.event, from: p.status, to, epoch: row.epoch, detail })]);
        // A first run has no journal yet.
        return { task: row, event: p.event, steps: row.runs > 1 ? this.#steps(p.id, Number(raw.no)) : [], signals: signalsBy.get(p.id) ?? [] };
      });
    });
  }

  /** Remaining capacity per capped workflow (tasks in leased statuses count against the cap). */
  #room(r: ClaimRequest): Map<string, number> {
    const room = capsOf(r);
    if (!room.size) return room;
    const counts = this.#stmt(
      `SELECT workflow, COUNT(*) AS n FROM stepwise_tasks WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ?
       AND workflow IN (${inList(room.size)}) GROUP BY workflow`,
    ).all(r.now, ...room.keys()) as Array<{ workflow: string; n: number }>;
    subtractLeased(room, counts);
    return room;
  }

  async appendRunEvents(w: RunEventsWrite): Promise<boolean> {
    return this.#tx(() => {
      const row = this.#stmt(`UPDATE stepwise_tasks SET usage = ? WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL}) RETURNING no`).get(w.usage, w.taskId, w.epoch) as
        | Raw
        | undefined;
      if (!row) return false;
      this.#append(Number(row.no), w.at, w.events);
      return true;
    });
  }

  async appendChunks(w: ChunksWrite): Promise<boolean> {
    return this.#tx(() => {
      if (!this.#stmt(`SELECT 1 FROM stepwise_tasks WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL})`).get(w.taskId, w.epoch)) return false;
      const insert = this.#stmt('INSERT INTO stepwise_stream_chunks (task_id, step, attempt, kind, delta, at) VALUES (?, ?, ?, ?, ?, ?)');
      for (const c of w.chunks) insert.run(w.taskId, c.step, c.attempt, c.kind, c.delta, c.at);
      return true;
    });
  }

  async getChunks(taskId: string, after: number, limit: number): Promise<StreamChunkRow[]> {
    return this.#translate(() =>
      (this.#stmt('SELECT * FROM stepwise_stream_chunks WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?').all(taskId, after, limit) as Raw[]).map(toChunkRow),
    );
  }

  async deleteChunks(taskId: string, step: string): Promise<void> {
    this.#translate(() => this.#stmt('DELETE FROM stepwise_stream_chunks WHERE task_id = ? AND step = ?').run(taskId, step));
  }

  async setProgress(taskId: string, epoch: number, progress: string): Promise<boolean> {
    return this.#translate(() =>
      this.#stmt(`UPDATE stepwise_tasks SET progress = ? WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL})`).run(progress, taskId, epoch).changes === 1,
    );
  }

  async heartbeat(r: HeartbeatRequest): Promise<HeldTask[]> {
    if (!r.held.length) return [];
    return this.#tx(() => {
      const out: HeldTask[] = [];
      const stmt = this.#stmt(
        `UPDATE stepwise_tasks SET lease_expires_at = ? WHERE id = ? AND epoch = ? AND lease_owner = ? AND status IN (${LEASED_SQL})
         RETURNING id, status, pause_requested, cancel_reason`,
      );
      for (const h of r.held) {
        const row = stmt.get(r.now + r.leaseMs, h.taskId, h.epoch, r.workerId) as Raw | undefined;
        if (row) {
          out.push({
            taskId: String(row.id),
            status: row.status as TaskStatus,
            pauseRequested: row.pause_requested === 1,
            cancelReason: (row.cancel_reason as string | null) ?? null,
          });
        }
      }
      return out;
    });
  }

  async nextRunAt(r: NextRunRequest): Promise<number | null> {
    if (!r.workflows.length) return null;
    // The due index in run_at order, from `after` on, until a task of one of the workflows.
    const row = this.#translate(() =>
      this.#stmt(
        `SELECT run_at FROM stepwise_tasks WHERE ${statusTerm(DUE_INDEX, DUE_INDEX)} AND run_at > ? AND +workflow IN (${inList(r.workflows.length)})
         ORDER BY run_at LIMIT 1`,
      ).get(r.after, ...r.workflows),
    ) as Raw | undefined;
    return row ? Number(row.run_at) : null;
  }

  async leaseOwners(now: number): Promise<string[]> {
    return (this.#stmt(`SELECT DISTINCT lease_owner FROM stepwise_tasks WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ? AND lease_owner IS NOT NULL`)
      .all(now) as Array<{ lease_owner: string }>).map((r) => r.lease_owner);
  }

  async endLeasesOf(owner: string, now: number): Promise<number> {
    return this.#tx(() =>
      this.#stmt(`UPDATE stepwise_tasks SET lease_expires_at = ? WHERE lease_owner = ? AND status IN (${LEASED_SQL}) AND lease_expires_at > ?`).run(now, owner, now).changes,
    );
  }

  async expireLeases(r: ExpireRequest): Promise<number> {
    return this.#tx(() => {
      const rows = this.#stmt(
        `SELECT no, id, status, epoch, lease_owner, workflow, workflow_version FROM stepwise_tasks WHERE status IN (${statusList(r.from)}) AND lease_expires_at <= ?`,
      ).all(r.now - (r.expiredForMs ?? 0)) as Array<{ no: number; id: string; status: TaskStatus; epoch: number; lease_owner: string | null; workflow: string; workflow_version: string }>;
      const { sets, params } = this.#assignments(r.set, r.now);
      for (const row of rows) {
        this.#stmt(`UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets} WHERE id = ?`).run(r.to, r.now, ...params, row.id);
        const note = r.note === undefined ? {} : { note: r.note.replaceAll('{workflow}', row.workflow).replaceAll('{version}', row.workflow_version) };
        const detail = JSON.stringify({ reason: 'lease expired', previousOwner: row.lease_owner, ...note });
        this.#append(row.no, r.now, [transitionEntry('system', 'lease-expiry', { event: r.event, from: row.status, to: r.to, detail })]);
      }
      return rows.length;
    });
  }

  async insertSignal(s: SignalWrite): Promise<SignalInsert | null> {
    return this.#tx(() => {
      const task = this.#stmt('SELECT no, status, wait_events FROM stepwise_tasks WHERE id = ?').get(s.taskId) as { no: number; status: TaskStatus; wait_events: string | null } | undefined;
      if (!task) return null;
      if (s.onlyIfAwaited && !(task.status === 'waiting' && task.wait_events?.includes(`|${s.name}|`))) {
        return { created: false, refused: { status: task.status, waitEvents: decodeEvents(task.wait_events) ?? [] } };
      }
      const res = this.#stmt(
        `INSERT INTO stepwise_signals (task_id, name, payload, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (task_id, idempotency_key) DO NOTHING`,
      ).run(s.taskId, s.name, s.payload, s.idempotencyKey, s.at);
      if (res.changes === 1) {
        // Taken by a signal that must be the only one of its wait: it waits for nothing more.
        this.#stmt(`UPDATE stepwise_tasks SET run_at = ?, wait_events = CASE WHEN ? THEN NULL ELSE wait_events END WHERE id = ? AND instr(wait_events, '|' || ? || '|') > 0`)
          .run(s.at, s.onlyIfAwaited ? 1 : 0, s.taskId, s.name);
        const signalId = Number(res.lastInsertRowid);
        this.#append(task.no, s.at, [signalReceivedEntry(s.actorKind, s.actorId, { signalId, name: s.name, payload: s.payload, idempotencyKey: s.idempotencyKey })]);
      }
      return { created: res.changes === 1 };
    });
  }

  #transactions: SqliteTransactions | undefined;
  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => StepWrite): Promise<{ value: T; accepted: boolean }> {
    this.#transactions ??= new SqliteTransactions(() => openSqlite(this.path, this.#options), (e) => this.#storeError(e));
    return this.#transactions.runInTransaction(fn, checkpoint);
  }

  #idempotency: SqliteIdempotency | undefined;
  idempotencyRecords(): IdempotencyBackend {
    return (this.#idempotency ??= new SqliteIdempotency(() => this.db, (fn) => this.#tx(fn)));
  }

  async appendTaskEvents(taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean> {
    return this.#tx(() => {
      const no = this.#noNow(taskId);
      if (no === undefined) return false;
      this.#append(no, at, entries);
      return true;
    });
  }

  /** What the approvals module (approvals.ts) borrows: statements, transactions, the log appender. */
  readonly #approvalHandle: approvals.SqliteHandle = {
    stmt: (sql) => this.#stmt(sql),
    tx: (fn) => this.#tx(fn),
    append: (no, at, entries) => this.#append(no, at, entries),
  };

  async insertApproval(w: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null> {
    return approvals.insertApproval(this.#approvalHandle, w);
  }

  async getApproval(id: string): Promise<ApprovalRow | null> {
    return this.#translate(() => approvals.getApproval(this.#approvalHandle, id));
  }

  async listApprovals(q: ApprovalQuery): Promise<ApprovalRow[]> {
    return this.#translate(() => approvals.listApprovals(this.#approvalHandle, q));
  }

  async updateApproval(w: ApprovalUpdate): Promise<ApprovalRow | null> {
    return approvals.updateApproval(this.#approvalHandle, w);
  }

  async appendEvents(w: LogAppend): Promise<boolean> {
    return approvals.appendEvents(this.#approvalHandle, w);
  }

  async deleteTasks(deletion: TaskSelection, limit: number): Promise<DeletedTask[]> {
    const gone = this.#tx(() => retention.deleteTasks({ stmt: (sql) => this.#stmt(sql) }, deletion, limit));
    for (const t of gone) {
      this.#taskNo.delete(t.id);
      this.#lastSeq.delete(t.no);
    }
    return gone.map(({ id, workflow, status }) => ({ id, workflow, status }));
  }

  async countTasks(selection: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>> {
    return this.#translate(() => retention.countTasks({ stmt: (sql) => this.#stmt(sql) }, selection, cap));
  }

  async registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void> {
    if (!workflows.length) return;
    this.#tx(() => {
      for (const w of workflows) {
        this.#stmt(
          `INSERT INTO stepwise_workflows (name, version, registered_at, last_seen_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
        ).run(w.name, w.version, w.at, w.at);
      }
    });
  }

  async listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>> {
    return (this.#stmt('SELECT name, version, last_seen_at FROM stepwise_workflows ORDER BY name, version').all() as Raw[]).map((r) => ({
      name: String(r.name),
      version: String(r.version),
      lastSeenAt: Number(r.last_seen_at),
    }));
  }
}
