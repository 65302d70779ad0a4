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
import { capsOf, nextWindow, servedSet, subtractLeased, takeWindow, type PickedTask } from '../claim-plan.ts';
import { LEASED_STATUSES, isTaskStatus, type TaskStatus } from '../lifecycle.ts';
import { ClosedError, InvalidArgumentError, StoreUnavailableError } from '../errors.ts';
import {
  STEP_COLUMNS, encodeEvents, isRaw, patchAssignments, stepValues, toEventRow, toSignalRow, toStepRow, toTaskRow,
} from '../rows.ts';
import { signalConsumedEntry, signalReceivedEntry, stepEntry, stepEntryAt, transitionEntry, transitionWriteEntries } from '../log-entries.ts';
import type {
  ClaimRequest, ClaimedTask, EventRow, ExpireRequest, HeartbeatRequest, HeldTask, ListQuery, LogPage, NewEvent, NewTask, NextRunRequest,
  SignalRow, SignalWrite, StepRow, StepWrite, Store, TaskPatch, TaskRow, TransitionWrite, WorkflowRegistration,
  WriteOp, WriteResult,
} from '../store.ts';

type Raw = Record<string, unknown>;

const inList = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
/**
 * Statuses as SQL literals (checked against the lifecycle's list): with literals, rather than
 * bound parameters, SQLite can prove that a query implies a partial index's WHERE clause and use it.
 */
const statusList = (statuses: readonly TaskStatus[]): string =>
  statuses
    .map((s) => {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown task status "${String(s)}"`);
      return `'${s}'`;
    })
    .join(', ');
const LEASED_SQL = statusList(LEASED_STATUSES);
/** The WHERE clauses of the partial indexes for claims (sql/sqlite/000001_init.sql). */
const DUE_INDEX: readonly TaskStatus[] = ['pending', 'waiting'];
const LEASED_INDEX: readonly TaskStatus[] = ['running', 'cancelling'];
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
const STEP_UPSERT = `ON CONFLICT (task_no, seq) DO UPDATE SET ${STEP_COLUMNS.slice(2).map((c) => `${c} = excluded.${c}`).join(', ')}`;
/** The checkpoint of a plain step: one statement, fenced by the epoch, one implicit transaction. */
const FENCED_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}) SELECT ?, ${inList(STEP_VALUE_COLUMNS.length)}
  WHERE EXISTS (SELECT 1 FROM stepwise_tasks WHERE no = ? AND epoch = ? AND status IN (${LEASED_SQL})) ${STEP_UPSERT}`;
/** The next `seq` of a task's log (one writer at a time: read and insert in one write transaction). */
const NEXT_EVENT_SEQ_SQL = 'SELECT coalesce(max(seq), 0) AS n FROM stepwise_events WHERE task_no = ?';
const INSERT_EVENT_SQL = 'INSERT INTO stepwise_events (task_no, seq, at, type, actor_kind, actor_id, data) VALUES (?, ?, ?, ?, ?, ?, ?)';
/** A checkpoint's entry: the next seq and the lease holder as actor, in one statement. */
const STEP_EVENT_SQL = `INSERT INTO stepwise_events (task_no, seq, at, type, actor_kind, actor_id, data)
  SELECT no, coalesce((SELECT max(seq) FROM stepwise_events WHERE task_no = stepwise_tasks.no), 0) + 1, ?, ?, 'worker', coalesce(lease_owner, 'unknown'), ?
  FROM stepwise_tasks WHERE no = ?`;
const UPSERT_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}) VALUES (?, ${inList(STEP_VALUE_COLUMNS.length)}) ${STEP_UPSERT}`;

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
  /** Task id → internal integer key (ids never change, so entries never go stale). */
  readonly #taskNo = new Map<string, number>();
  readonly #now: () => number;
  /** The checkpoint of a plain step in its own write transaction (built once: the hot path). */
  #stepTx: ((w: StepWrite) => boolean) & { immediate: (w: StepWrite) => boolean } | undefined;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path;
    this.description = `sqlite:${path} (synchronous=${options.synchronous ?? 'FULL'})`;
    this.#db = openSqlite(path, options);
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

  /** The internal key of a task, or undefined if there is no such task. */
  #no(taskId: string): number | undefined {
    let no = this.#taskNo.get(taskId);
    if (no === undefined) {
      const row = this.#stmt('SELECT no FROM stepwise_tasks WHERE id = ?').get(taskId) as { no: number } | undefined;
      if (!row) return undefined;
      no = row.no;
      if (this.#taskNo.size > 100_000) this.#taskNo.clear();
      this.#taskNo.set(taskId, no);
    }
    return no;
  }

  /** Runs `fn` in a `BEGIN IMMEDIATE` transaction; driver errors are translated here. */
  #tx<T>(fn: () => T): T {
    return this.#translate(() => this.db.transaction(fn).immediate());
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
    return e;
  }

  async migrate(): Promise<void> {
    this.#translate(() => migrateSqlite(this.db, this.#now()));
  }

  async close(): Promise<void> {
    if (!this.#db) return;
    this.#statements.clear();
    this.#db.close();
    this.#db = null;
  }

  async insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
    return this.#tx(() => {
      const row = this.#stmt(
        `INSERT INTO stepwise_tasks (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at)
         VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?)
         ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
      ).get(task.id, task.workflow, task.workflowVersion, task.input, task.idempotencyKey, task.runAt, task.createdAt, task.createdAt) as Raw | undefined;
      if (row) {
        const entry = transitionEntry(task.actorKind ?? 'user', task.actorId ?? 'anonymous', { event: 'create', from: null, to: 'pending' });
        this.#append(Number(row.no), task.createdAt, [entry]);
        return { task: toTaskRow(row), created: true };
      }
      return { task: this.#byKey(task.idempotencyKey as string) as TaskRow, created: false };
    });
  }

  async getTask(id: string): Promise<TaskRow | null> {
    const row = this.#stmt('SELECT * FROM stepwise_tasks WHERE id = ?').get(id) as Raw | undefined;
    return row ? toTaskRow(row) : null;
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
    return this.#steps(taskId);
  }

  #steps(taskId: string): StepRow[] {
    const no = this.#no(taskId);
    if (no === undefined) return [];
    return (this.#stmt('SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? ORDER BY seq').all(taskId, no) as Raw[]).map(toStepRow);
  }

  async getEvents(taskId: string, after = 0, limit?: number): Promise<EventRow[]> {
    const no = this.#no(taskId);
    if (no === undefined) return [];
    return (this.#stmt('SELECT ? AS task_id, * FROM stepwise_events WHERE task_no = ? AND seq > ? ORDER BY seq LIMIT ?').all(
      taskId, no, after, limit ?? -1,
    ) as Raw[]).map(toEventRow);
  }

  /**
   * The log of every task in `id` order. Writers take the file's write lock one at a time and a
   * row's id is max(id) + 1 when it is inserted, so ids are assigned in commit order: a reader
   * that resumes after the last id it saw misses nothing. The cursor is that id, as text.
   */
  async readLog(after: string | null, limit: number): Promise<LogPage> {
    const from = after === null ? 0 : Number(after);
    if (!Number.isSafeInteger(from)) throw new InvalidArgumentError(`Invalid log cursor "${after}"`);
    const rows = this.#translate(() => this.#stmt(
      `SELECT e.id, t.id AS task_id, e.seq, e.at, e.type, e.actor_kind, e.actor_id, e.data
       FROM stepwise_events e JOIN stepwise_tasks t ON t.no = e.task_no WHERE e.id > ? ORDER BY e.id LIMIT ?`,
    ).all(from, limit)) as Raw[];
    const last = rows.at(-1);
    return { events: rows.map((r) => ({ ...toEventRow(r), cursor: String(r.id) })), cursor: last ? String(last.id) : after };
  }

  async getSignals(taskId: string): Promise<SignalRow[]> {
    return (this.#stmt('SELECT * FROM stepwise_signals WHERE task_id = ? ORDER BY id').all(taskId) as Raw[]).map(toSignalRow);
  }

  /** Appends entries to task `no`'s log, numbered after its last one (inside a write transaction). */
  #append(no: number, at: number, entries: readonly NewEvent[]): void {
    if (!entries.length) return;
    let seq = Number((this.#stmt(NEXT_EVENT_SEQ_SQL).get(no) as { n: number }).n);
    const insert = this.#stmt(INSERT_EVENT_SQL);
    for (const e of entries) insert.run(no, ++seq, at, e.type, e.actorKind, e.actorId, e.data);
  }

  async transition(write: TransitionWrite): Promise<TaskRow | null> {
    return this.#tx(() => this.#transition(write));
  }

  #transition(w: TransitionWrite): TaskRow | null {
    const current = this.#stmt('SELECT status, version, epoch, pause_requested FROM stepwise_tasks WHERE id = ?').get(w.taskId) as
      | { status: TaskStatus; version: number; epoch: number; pause_requested: number }
      | undefined;
    if (!current || !w.from.includes(current.status)) return null;
    if (w.pauseRequested !== undefined && (current.pause_requested === 1) !== w.pauseRequested) return null;
    if ('version' in w.guard ? current.version !== w.guard.version : current.epoch !== w.guard.epoch) return null;
    const { sets, params } = this.#assignments(w.set);
    const row = this.#stmt(`UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets} WHERE id = ? RETURNING *`).get(
      w.to, w.at, ...params, w.taskId,
    ) as Raw;
    this.#append(Number(row.no), w.at, transitionWriteEntries(w));
    if (w.deleteSteps?.length) {
      this.#stmt(`DELETE FROM stepwise_steps WHERE task_no = ? AND seq IN (${inList(w.deleteSteps.length)})`).run(this.#no(w.taskId), ...w.deleteSteps);
    }
    for (const step of w.steps ?? []) this.#upsertStep(step);
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

  /** `, col = ?, …` for a patch, and its parameters. */
  #assignments(patch: TaskPatch): { sets: string; params: unknown[] } {
    let sets = '';
    const params: unknown[] = [];
    for (const [col, value] of patchAssignments(patch, (b) => (b ? 1 : 0))) {
      if (isRaw(value)) sets += `, ${col} = ${value.raw}`;
      else {
        sets += `, ${col} = ?`;
        params.push(value);
      }
    }
    return { sets, params };
  }

  #upsertStep(step: StepRow): void {
    const no = this.#no(step.taskId);
    if (no === undefined) return;
    this.#stmt(UPSERT_STEP_SQL).run(no, ...stepValues(step).slice(1));
  }

  #consume(signalId: number, seq: number): void {
    this.#stmt('UPDATE stepwise_signals SET consumed_seq = ? WHERE id = ? AND consumed_seq IS NULL').run(seq, signalId);
  }

  /** The fenced journal write, one statement: accepted only while the writer's epoch is current and the task leased. */
  #stepWrite(w: StepWrite): boolean {
    const s = w.step;
    const no = this.#no(w.taskId);
    if (no === undefined || s.taskId !== w.taskId) return false;
    const accepted =
      this.#stmt(FENCED_STEP_SQL).run(
        no, s.seq, s.name, s.kind, s.status, s.output, s.error, s.attempts, s.startedAt, s.finishedAt, s.wakeAt, s.epoch, s.done, no, w.epoch,
      ).changes === 1;
    if (!accepted) return false;
    const at = stepEntryAt(s);
    // The entry's actor is the lease holder: 'worker' and the id are placeholders replaced in SQL.
    this.#stmt(STEP_EVENT_SQL).run(at, `step:${s.status}`, stepEntry('worker', '', s).data, no);
    if (w.consume) {
      this.#consume(w.consume.signalId, w.consume.seq);
      const owner = (this.#stmt('SELECT lease_owner FROM stepwise_tasks WHERE no = ?').get(no) as { lease_owner: string | null }).lease_owner;
      this.#append(no, at, [signalConsumedEntry('worker', owner ?? 'unknown', w.consume)]);
    }
    return true;
  }

  async writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    return this.writeBatchNow(ops);
  }

  writeBatchNow(ops: readonly WriteOp[]): WriteResult[] {
    const [only] = ops;
    // The hot path of a plain step: one statement in its own implicit transaction.
    if (ops.length === 1 && only?.kind === 'step' && !only.consume) {
      try {
        this.#stepTx ??= this.db.transaction((w: StepWrite) => this.#stepWrite(w));
        return [this.#stepTx.immediate(only)];
      } catch (e) {
        throw this.#storeError(e);
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
      return picked.map((p) => {
        const to = p.event === 'claim' ? r.claim.to : r.reclaim.to;
        const raw = this.#stmt(
          `UPDATE stepwise_tasks SET status = ?, lease_owner = ?, lease_expires_at = ?, epoch = epoch + 1,
             version = version + 1, runs = runs + 1, wait = NULL, wait_events = NULL, updated_at = ?
           WHERE id = ? RETURNING *`,
        ).get(to, r.workerId, expires, r.now, p.id) as Raw;
        this.#taskNo.set(p.id, Number(raw.no));
        const row = toTaskRow(raw);
        const detail = p.event === 'reclaim' ? JSON.stringify({ previousOwner: p.leaseOwner }) : null;
        this.#append(Number(raw.no), r.now, [transitionEntry('worker', r.workerId, { event: p.event, from: p.status, to, epoch: row.epoch, detail })]);
        // A first run has no journal yet.
        return { task: row, event: p.event, steps: row.runs > 1 ? this.#steps(p.id) : [], signals: signalsBy.get(p.id) ?? [] };
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

  async expireLeases(r: ExpireRequest): Promise<number> {
    return this.#tx(() => {
      const rows = this.#stmt(
        `SELECT no, id, status, epoch, lease_owner FROM stepwise_tasks WHERE status IN (${statusList(r.from)}) AND lease_expires_at <= ?`,
      ).all(r.now) as Array<{ no: number; id: string; status: TaskStatus; epoch: number; lease_owner: string | null }>;
      const { sets, params } = this.#assignments(r.set);
      for (const row of rows) {
        this.#stmt(`UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets} WHERE id = ?`).run(r.to, r.now, ...params, row.id);
        const detail = JSON.stringify({ reason: 'lease expired', previousOwner: row.lease_owner });
        this.#append(row.no, r.now, [transitionEntry('system', 'lease-expiry', { event: r.event, from: row.status, to: r.to, detail })]);
      }
      return rows.length;
    });
  }

  async insertSignal(s: SignalWrite): Promise<{ created: boolean } | null> {
    return this.#tx(() => {
      const task = this.#stmt('SELECT no FROM stepwise_tasks WHERE id = ?').get(s.taskId) as { no: number } | undefined;
      if (!task) return null;
      const res = this.#stmt(
        `INSERT INTO stepwise_signals (task_id, name, payload, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (task_id, idempotency_key) DO NOTHING`,
      ).run(s.taskId, s.name, s.payload, s.idempotencyKey, s.at);
      if (res.changes === 1) {
        this.#stmt(`UPDATE stepwise_tasks SET run_at = ? WHERE id = ? AND instr(wait_events, '|' || ? || '|') > 0`).run(s.at, s.taskId, s.name);
        const signalId = Number(res.lastInsertRowid);
        this.#append(task.no, s.at, [signalReceivedEntry(s.actorKind, s.actorId, { signalId, name: s.name, payload: s.payload, idempotencyKey: s.idempotencyKey })]);
      }
      return { created: res.changes === 1 };
    });
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
