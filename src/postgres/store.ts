/**
 * @module postgres/store
 * The distributed store: one PostgreSQL schema shared by any number of workers on any number of
 * machines. Semantics are those of the SQLite store (the reference); what differs is how
 * concurrent writers are serialized:
 *
 * - A transition is one statement: a CTE that locks the task row by its primary key (`SELECT …
 *   FOR UPDATE`, the guard checked on the newest row version), updates it (bumping its log
 *   counter `event_seq` by the number of entries), appends the log entries numbered from that
 *   counter, and upserts steps / consumes signals only if the update happened. A transition that sets
 *   `waitEvents` runs a second statement in the same transaction (after the lock is held, so that
 *   its fresh snapshot sees any signal committed before), see {@link PostgresStore.transition}.
 * - A step write is one autocommit statement fenced by an UPDATE of the task row that bumps its
 *   log counter only while the writer's epoch is current (see `appendFence`): a claim that bumps
 *   the epoch either waits for the write, or makes it fail its re-check; concurrent appenders of
 *   one task queue on the row lock and number their entries one after the other.
 * - The log (`events`) is read across tasks in (xid, id) order, below the snapshot's xmin (see
 *   {@link PostgresStore.readLog} and sql/postgres/000003_events.sql).
 * - Claims lock candidates with `FOR UPDATE SKIP LOCKED`, so that workers take disjoint tasks
 *   without waiting on each other; per-workflow caps serialize on `pg_advisory_xact_lock`.
 * - Wake-ups travel by LISTEN/NOTIFY on two channels named after the schema: `<schema>_wake` for
 *   work (what workers listen to) and `<schema>_done` for finished tasks (what result waiters
 *   listen to).
 *
 * `pg` is an optional peer dependency: it is loaded when the first PostgresStore is built.
 */
import { createRequire } from 'node:module';
import type { Client, ClientBase, Pool, QueryResult } from 'pg';
import { migratePostgres } from './migrate.ts';
import { PATCH_TYPES, Params, STEP_TYPES, STEP_UPSERT_LOGGED_SET, appendFence, heartbeatSql, leasedCountSql, lockById, nextDueSql, plainStepSql, servedSql, sqlStatuses, tablesOf, type Tables } from './sql-text.ts';
import { stepBatchSql, transitionBatchSql, isBatchableTransition } from './batch-sql.ts';
import { WakeListener, payload } from './wake.ts';
import { HotConnection } from './hot-connection.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { ClosedError, InvalidArgumentError, StepwiseError, StoreUnavailableError } from '../errors.ts';
import {
  STEP_COLUMNS, encodeEvents, isRaw, patchAssignments, stepValues, toEventRow, toSignalRow, toStepRow, toTaskRow,
} from '../rows.ts';
import {
  claimersOf, mergeLog, journalCarries, signalConsumedEntry, signalReceivedEntry, stepEntry, stepEntryAt, transitionEntry, transitionWriteEntries, uniqueConsumes, uniqueSteps,
} from '../log-entries.ts';
import type {
  ClaimRequest, ClaimedTask, EventRow, ExpireRequest, HeartbeatRequest, HeldTask, ListQuery, LogPage, NewEvent, NewTask, NextRunRequest,
  SignalRow, SignalWrite, StepRow, StepWrite, Store, TaskPatch, TaskRow, TransitionWrite, WakeEvent, WakeTopic,
  WorkflowRegistration, WriteOp, WriteResult,
} from '../store.ts';
import { topicOf } from '../store.ts';

type Raw = Record<string, unknown>;
type PgModule = typeof import('pg');

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
  /** Clock for migration timestamps only; everything else gets "now" from the caller. */
  now?: () => number;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,57}$/;
/** How many distinct statement texts are prepared by name (see `#rows`). */
const MAX_NAMED_STATEMENTS = 500;
/** Transactions that lose a deadlock or serialization race are run again, at most this often. */
const TX_ATTEMPTS = 3;

let pgModule: PgModule | undefined;
function loadPg(): PgModule {
  if (pgModule) return pgModule;
  try {
    pgModule = createRequire(import.meta.url)('pg') as PgModule;
  } catch (e) {
    const missing = (e as { code?: unknown }).code === 'MODULE_NOT_FOUND';
    throw new StoreUnavailableError(
      missing
        ? 'The PostgreSQL store needs the "pg" package, which is not installed: npm install pg'
        : `The "pg" package failed to load: ${(e as Error).message}`,
      { cause: e },
    );
  }
  return pgModule;
}

const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH',
]);

/**
 * Whether a driver error means "cannot talk to the database" (rather than a bad statement):
 * socket errors, SQLSTATE class 08 (connection exception), 57P01-03 (server shutting down or
 * starting), 53300 (too many connections), 28xxx (authentication), 3D000 (no such database).
 */
function isConnectionError(e: unknown): boolean {
  if (typeof e !== 'object' || e === null) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (CONNECTION_ERRNOS.has(code)) return true;
    if (/^(08|28)/.test(code) || ['57P01', '57P02', '57P03', '53300', '3D000'].includes(code)) return true;
  }
  const message = (e as { message?: unknown }).message;
  return typeof message === 'string' && /connection terminated|timeout exceeded when trying to connect|not queryable|connection error/i.test(message);
}

/**
 * Whether a connection must not be used again: it is broken, or one of its prepared statements was
 * planned against a column type that a migration has since changed (PostgreSQL then fails that
 * statement on that connection every time: "cached plan must not change result type").
 */
function isUnusableConnection(e: unknown): boolean {
  return isConnectionError(e) || isStalePlan(e);
}

function isStalePlan(e: unknown): boolean {
  const { code, message } = (e ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && /cached plan must not change result type/.test(message);
}

function isRetryableConflict(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** The one place where driver errors become Stepwise errors. */
function translateError(e: unknown, description: string): unknown {
  if (e instanceof StepwiseError) return e;
  if (isConnectionError(e)) {
    return new StoreUnavailableError(`PostgreSQL (${description}) is unavailable: ${(e as Error).message}`, { cause: e });
  }
  return e;
}

/** `postgres://user@host:port/db`: the URL without password or query string. */
function printableUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username ? `${u.username}@` : ''}${u.host}${u.pathname}`;
  } catch {
    return 'postgres://…';
  }
}

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
  readonly #url: string;
  readonly #pg: PgModule;
  #pool: Pool | null;
  /** A connection kept for lone step checkpoints (see hot-connection.ts). */
  readonly #hot: HotConnection;
  readonly #poolSize: number;
  readonly #listeners = new Set<WakeListener>();
  /** Statement text → prepared statement name; one map per store, hence per pool. */
  readonly #statementNames = new Map<string, string>();
  #plainStepSql: string | undefined;
  readonly #now: () => number;
  /** Quoted table names. */
  readonly #t: Tables;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    const schema = options.schema ?? 'stepwise';
    if (!SCHEMA_NAME.test(schema)) {
      throw new InvalidArgumentError(
        `Invalid PostgreSQL schema name "${schema}": use letters, digits and _ (not first), at most 58 characters.`,
      );
    }
    const poolSize = options.poolSize ?? 10;
    if (!Number.isInteger(poolSize) || poolSize < 1) throw new InvalidArgumentError(`poolSize must be a positive integer, got ${poolSize}`);
    this.#pg = loadPg();
    this.parallelWrites = Math.max(1, Math.floor(poolSize / 2));
    this.#url = url;
    this.schema = schema;
    this.channel = `${schema}_wake`;
    this.settledChannel = `${schema}_done`;
    this.description = `${printableUrl(url)} (schema ${schema})`;
    this.#now = options.now ?? Date.now;
    this.#t = tablesOf(schema);
    // Generic plans: the statements are prepared once per connection and their parameters are arrays
    // whose sizes vary; re-planning each execution (custom plans) would cost more than running it.
    this.#pool = new this.#pg.Pool({
      connectionString: url, max: poolSize, keepAlive: true, application_name: 'stepwise', options: '-c plan_cache_mode=force_generic_plan',
    });
    // An idle pooled connection that dies is dropped by the pool; the next query opens a new one.
    this.#pool.on('error', () => undefined);
    this.#hot = new HotConnection(this.#pool, poolSize, isUnusableConnection);
    this.#poolSize = poolSize;
  }

  get #db(): Pool {
    if (!this.#pool) throw new ClosedError('The PostgreSQL store');
    return this.#pool;
  }

  /** Runs `fn`, translating driver errors at this one boundary. */
  async #run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw translateError(e, this.description);
    }
  }

  /** `#run`'s translation, as a rejection handler. */
  readonly #translate = (e: unknown): never => {
    throw translateError(e, this.description);
  };

  /**
   * Runs a statement as a named prepared statement (parsed and planned once per connection, which
   * halves the cost of a step write). Texts depend only on the shape of a write (which patch
   * columns, whether it has steps), so there are few of them; past a bound, statements go unnamed.
   */
  async #rows(db: ClientBase | Pool, text: string, values: readonly unknown[] = []): Promise<Raw[]> {
    return (await this.#query(db, text, values)).rows;
  }

  #query(db: ClientBase | Pool, text: string, values: readonly unknown[]): Promise<QueryResult<Raw>> {
    let name = this.#statementNames.get(text);
    if (name === undefined && this.#statementNames.size < MAX_NAMED_STATEMENTS) {
      name = `stepwise_${this.#statementNames.size + 1}`;
      this.#statementNames.set(text, name);
    }
    const config = name === undefined ? { text, values: values as unknown[] } : { name, text, values: values as unknown[] };
    if (db !== this.#pool) return db.query<Raw>(config);
    // Through the pool, a connection whose prepared statement went stale (a migration changed a
    // column's type) is destroyed by the pool on the error: run it again on another one.
    const pool = db;
    const attempt = (left: number): Promise<QueryResult<Raw>> =>
      pool.query<Raw>(config).catch((e: unknown) => (left > 0 && isStalePlan(e) ? attempt(left - 1) : Promise.reject(e)));
    return attempt(this.#poolSize);
  }

  /** `fn` in one transaction on one pooled client; re-run if it loses a deadlock. */
  async #tx<T>(fn: (client: ClientBase) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#db.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (e) {
        if (isUnusableConnection(e)) broken = e as Error;
        else await client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError as Error));
        if (attempt < TX_ATTEMPTS && (isRetryableConflict(e) || isStalePlan(e))) continue;
        throw e;
      } finally {
        client.release(broken);
      }
    }
  }

  async migrate(): Promise<void> {
    await this.#run(async () => {
      const client = await this.#db.connect();
      let broken: Error | undefined;
      try {
        await migratePostgres(client, this.schema, this.#now());
      } catch (e) {
        if (isUnusableConnection(e)) broken = e as Error;
        throw e;
      } finally {
        client.release(broken);
      }
    });
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    if (!pool) return;
    this.#pool = null;
    this.#hot.close();
    const listeners = [...this.#listeners];
    this.#listeners.clear();
    await Promise.all(listeners.map((l) => l.stop()));
    await pool.end();
  }

  // ── Reads ────────────────────────────────────────────────────────────────────────────────

  async getTask(id: string): Promise<TaskRow | null> {
    return this.#run(async () => {
      const [row] = await this.#rows(this.#db, `SELECT * FROM ${this.#t.tasks} WHERE id = $1`, [id]);
      return row ? toTaskRow(row) : null;
    });
  }

  async findTaskByKey(key: string): Promise<TaskRow | null> {
    return this.#run(async () => {
      const [row] = await this.#rows(this.#db, `SELECT * FROM ${this.#t.tasks} WHERE idempotency_key = $1`, [key]);
      return row ? toTaskRow(row) : null;
    });
  }

  async listTasks(q: ListQuery): Promise<TaskRow[]> {
    return this.#run(async () => {
      const p = new Params();
      const where: string[] = [];
      if (q.statuses?.length) where.push(`status IN (${sqlStatuses(q.statuses)})`);
      if (q.workflow !== undefined) where.push(`workflow = ${p.add(q.workflow, 'text')}`);
      if (q.before !== undefined) where.push(`id < ${p.add(q.before, 'text')}`);
      const text = `SELECT * FROM ${this.#t.tasks} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY id DESC LIMIT ${p.add(q.limit, 'integer')}`;
      return (await this.#rows(this.#db, text, p.values)).map(toTaskRow);
    });
  }

  async getSteps(taskId: string): Promise<StepRow[]> {
    return this.#run(async () =>
      (await this.#rows(this.#db, `SELECT * FROM ${this.#t.steps} WHERE task_id = $1 ORDER BY seq`, [taskId])).map(toStepRow),
    );
  }

  async getEvents(taskId: string, after = 0, limit?: number): Promise<EventRow[]> {
    return this.#run(async () => {
      // One statement, one snapshot: an entry a retry moves from its journal row to `events` is
      // seen in exactly one of the two places. `c` rows are the claims, for the carried entries' actors.
      const t = this.#t;
      const rows = await this.#rows(
        this.#db,
        `(SELECT 'e' AS src, task_id, seq, at, type, actor_kind, actor_id, data FROM ${t.events} WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3)
         UNION ALL (SELECT 's', task_id, log_seq, 0, NULL, NULL, NULL, row_to_json(s)::text FROM ${t.steps} s WHERE task_id = $1 AND log_seq > $2 ORDER BY log_seq LIMIT $3)
         UNION ALL SELECT 'c', task_id, seq, at, type, actor_kind, actor_id, data FROM ${t.events} WHERE task_id = $1 AND type = 'transition' AND actor_kind = 'worker'`,
        [taskId, after, limit ?? null],
      );
      const own = rows.filter((r) => r.src === 'e').map(toEventRow);
      const carried = rows.filter((r) => r.src === 's').map((r) => ({ step: toStepRow(JSON.parse(String(r.data)) as Raw), logSeq: Number(r.seq) }));
      const claimers = carried.length
        ? claimersOf(rows.filter((r) => r.src === 'c').map((r) => ({ actorKind: String(r.actor_kind), actorId: String(r.actor_id), data: r.data === null ? null : String(r.data) })))
        : new Map<number, string>();
      return mergeLog(taskId, own, carried, claimers, limit);
    });
  }

  /**
   * The log of every task in (xid, id) order, only rows of transactions older than the snapshot's
   * xmin. Identity ids are handed out when rows are inserted, not when they commit: a transaction
   * holding id 10 may commit after one holding id 11, so "after id 11" would skip 10 for good. A
   * transaction's xid is taken before it writes, and every transaction with an xid below the
   * snapshot's xmin has ended (committed, its rows visible, or rolled back): no row can ever be
   * added below that line. So a page holds everything there is up to its last (xid, id), and a
   * later read from that cursor misses nothing. Entries of a transaction still running (or a
   * long transaction holding xmin back) wait until it ends. The cursor is `<xid>:<id>`.
   */
  async readLog(after: string | null, limit: number): Promise<LogPage> {
    let xid = '0';
    let id = '0';
    if (after !== null) {
      const m = /^(\d{1,20}):(\d{1,19})$/.exec(after);
      if (!m) throw new InvalidArgumentError(`Invalid log cursor "${after}"`);
      [xid, id] = [m[1] as string, m[2] as string];
    }
    return this.#run(async () => {
      const rows = await this.#rows(
        this.#db,
        `SELECT task_id, seq, at, type, actor_kind, actor_id, data, xid::text AS xid_text, id FROM ${this.#t.events}
         WHERE (xid, id) > ($1::xid8, $2::bigint) AND xid < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY xid, id LIMIT $3`,
        [xid, id, limit],
      );
      const last = rows.at(-1);
      return {
        events: rows.map((r) => ({ ...toEventRow(r), cursor: `${String(r.xid_text)}:${String(r.id)}` })),
        cursor: last ? `${String(last.xid_text)}:${String(last.id)}` : after,
      };
    });
  }

  async getSignals(taskId: string): Promise<SignalRow[]> {
    return this.#run(async () =>
      (await this.#rows(this.#db, `SELECT * FROM ${this.#t.signals} WHERE task_id = $1 ORDER BY id`, [taskId])).map(toSignalRow),
    );
  }

  // ── Task creation ────────────────────────────────────────────────────────────────────────

  async insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
    const created = transitionEntry(task.actorKind ?? 'user', task.actorId ?? 'anonymous', { event: 'create', from: null, to: 'pending' });
    return this.#run(async () => {
      // One statement: the task and its 'create' log entry (seq 1), or nothing if the key exists. A
      // concurrent insert of the same key makes ON CONFLICT wait for it, so the re-select sees it;
      // the loop covers the (retention) case where the existing task vanished in between.
      for (let attempt = 1; ; attempt++) {
        const [row] = await this.#rows(
          this.#db,
          `WITH ins AS (
             INSERT INTO ${this.#t.tasks} (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at, event_seq)
             VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7, $7, 1)
             ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING *
           ), h AS (
             INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
             SELECT id, 1, created_at, $10, $11, $12, $13 FROM ins
           )
           SELECT ins.*, CASE WHEN $9::text IS NOT NULL THEN pg_notify($8, $9) END AS notified FROM ins`,
          [
            task.id, task.workflow, task.workflowVersion, task.input, task.idempotencyKey, task.runAt, task.createdAt, this.#channelOf(task.notify), payload(task.notify),
            created.type, created.actorKind, created.actorId, created.data,
          ],
        );
        if (row) return { task: toTaskRow(row), created: true };
        const existing = await this.findTaskByKey(task.idempotencyKey as string);
        if (existing) return { task: existing, created: false };
        if (attempt >= TX_ATTEMPTS) throw new Error(`insertTask: idempotency key "${task.idempotencyKey}" conflicts with a task that cannot be read`);
      }
    });
  }

  // ── Guarded writes ───────────────────────────────────────────────────────────────────────

  /**
   * One statement, unless `set.waitEvents` names events: then a second statement in the same
   * transaction makes the task due if a matching unconsumed signal exists. It must be a separate
   * statement: under READ COMMITTED a statement's snapshot is taken when it starts, possibly before
   * a concurrent `insertSignal` (which locks the task row first) committed; the second statement
   * starts after this transaction holds the row lock, so it sees every signal committed before, and
   * any signal committed after sees this task's `wait_events`.
   */
  async transition(write: TransitionWrite): Promise<TaskRow | null> {
    return this.#run(() =>
      write.set.waitEvents?.length ? this.#tx((c) => this.#transition(c, write)) : this.#transition(this.#db, write),
    );
  }

  async #transition(db: ClientBase | Pool, w: TransitionWrite): Promise<TaskRow | null> {
    if (!w.from.length) return null;
    const { text, values } = this.#transitionSql(w);
    const [row] = await this.#rows(db, text, values);
    if (!row) return null;
    const events = encodeEvents(w.set.waitEvents ?? null);
    if (events !== null) {
      const [due] = await this.#rows(
        db,
        `UPDATE ${this.#t.tasks} SET run_at = $1 WHERE id = $2 AND EXISTS
           (SELECT 1 FROM ${this.#t.signals} WHERE task_id = $2 AND consumed_seq IS NULL AND strpos($3, '|' || name || '|') > 0)
         RETURNING *`,
        [w.at, w.taskId, events],
      );
      if (due) return toTaskRow(due);
    }
    return toTaskRow(row);
  }

  /**
   * `cur` locks the task and keeps it if the guard holds (checked on the newest row version, once
   * a concurrent writer has committed); `upd` applies the patch and adds the number of entries to
   * the log counter; `log` appends the entries numbered below the new counter; `steps` and
   * `consumed` run only if `upd` did.
   */
  #transitionSql(w: TransitionWrite): { text: string; values: unknown[] } {
    const t = this.#t;
    const p = new Params();
    const id = p.add(w.taskId, 'text');
    const guard = 'version' in w.guard ? `version = ${p.add(w.guard.version, 'integer')}` : `epoch = ${p.add(w.guard.epoch, 'integer')}`;
    const pause = w.pauseRequested === undefined ? '' : ` AND pause_requested = ${w.pauseRequested ? 'TRUE' : 'FALSE'}`;
    const to = p.add(w.to, 'text');
    const at = p.add(w.at, 'bigint');
    const sets = this.#assignments(w.set, p);
    const entries = transitionWriteEntries(w);
    const n = p.add(entries.length, 'integer');
    let text = `WITH cur AS (
        SELECT id AS cur_id FROM (${lockById(t, id, 'UPDATE')}) l
        WHERE status IN (${sqlStatuses(w.from)}) AND ${guard}${pause}
      ), upd AS (
        UPDATE ${t.tasks} AS t SET status = ${to}, version = t.version + 1, updated_at = ${at}, event_seq = t.event_seq + ${n}${sets}
        FROM cur WHERE t.id = cur.cur_id RETURNING t.*
      ), log AS (${this.#appendSql(p, 'upd', 'upd.id', `upd.event_seq - ${n}`, at, entries)}
      )`;
    const steps = uniqueSteps(w.steps ?? []);
    // Journal rows this write deletes or rewrites keep the entries they carry: stored on their own
    // first, same seq (one snapshot: this reads the rows as they were before the statement).
    const touched = [...(w.deleteSteps ?? []), ...steps.map((s) => s.seq)];
    if (touched.length) {
      text += `, kept AS (
        INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT s.task_id, s.log_seq, coalesce(s.finished_at, s.started_at, 0), 'step:' || s.status, 'worker',
          coalesce((SELECT e.actor_id FROM ${t.events} e WHERE e.task_id = s.task_id AND e.type = 'transition' AND e.actor_kind = 'worker'
            AND (e.data::json->>'event') IN ('claim', 'reclaim') AND (e.data::json->>'epoch')::int = s.epoch LIMIT 1), 'unknown'),
          json_build_object('seq', s.seq, 'name', s.name, 'kind', s.kind, 'status', s.status, 'output', s.output::json, 'error', s.error::json,
            'attempts', s.attempts, 'startedAt', s.started_at, 'finishedAt', s.finished_at, 'wakeAt', s.wake_at, 'epoch', s.epoch,
            'done', s.done, 'calledAfter', s.called_after)::text
        FROM ${t.steps} s WHERE s.task_id = ${id} AND s.log_seq IS NOT NULL AND s.seq = ANY(${p.add(touched, 'integer[]')}) AND EXISTS (SELECT 1 FROM upd)
      )`;
    }
    if (steps.length) {
      const columns = STEP_COLUMNS.map((_, i) => p.add(steps.map((s) => stepValues(s)[i]), `${STEP_TYPES[i]}[]`));
      // A row carrying its entry takes that entry's seq: its place among this write's entries.
      const places = p.add(steps.map((s) => {
        const j = entries.findIndex((e) => e.carriedBy === s.seq);
        return j < 0 ? null : j + 1;
      }), 'integer[]');
      text += `, steps AS (
        INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
        SELECT ${STEP_COLUMNS.map((c) => `j.${c}`).join(', ')}, upd.event_seq - ${n} + j.place
        FROM unnest(${columns.join(', ')}, ${places}) AS j(${STEP_COLUMNS.join(', ')}, place), upd
        ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
      )`;
    }
    if (w.deleteSteps?.length) {
      text += `, deleted AS (
        DELETE FROM ${t.steps} WHERE task_id = ${id} AND seq = ANY(${p.add(w.deleteSteps, 'integer[]')}) AND EXISTS (SELECT 1 FROM upd)
      )`;
    }
    const consume = uniqueConsumes(w.consume ?? []);
    if (consume.length) {
      text += `, consumed AS (
        UPDATE ${t.signals} AS s SET consumed_seq = c.seq
        FROM unnest(${p.add(consume.map((c) => c.signalId), 'bigint[]')}, ${p.add(consume.map((c) => c.seq), 'integer[]')}) AS c(id, seq)
        WHERE s.id = c.id AND s.consumed_seq IS NULL AND EXISTS (SELECT 1 FROM upd)
      )`;
    }
    text += w.notify
      ? ` SELECT upd.*, pg_notify(${p.add(this.#channelOf(w.notify), 'text')}, ${p.add(payload(w.notify), 'text')}) AS notified FROM upd`
      : ' SELECT * FROM upd';
    return { text, values: p.values };
  }

  /**
   * An INSERT of `entries` into the log of the task `task` for each row of `from` (one row at
   * most), numbered `base` + 1, + 2, … by their place (`base`: the task's counter before this
   * write). Entries carried by journal rows keep their place but are not inserted.
   */
  #appendSql(p: Params, from: string, task: string, base: string, at: string, entries: readonly NewEvent[]): string {
    const own = entries.map((e, i) => ({ e, place: i + 1 })).filter((x) => x.e.carriedBy === undefined);
    return `
        INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT ${task}, ${base} + e.place, ${at}, e.type, e.kind, e.actor, e.data
        FROM ${from}, unnest(${p.add(own.map((x) => x.e.type), 'text[]')}, ${p.add(own.map((x) => x.e.actorKind), 'text[]')},
          ${p.add(own.map((x) => x.e.actorId), 'text[]')}, ${p.add(own.map((x) => x.e.data), 'text[]')},
          ${p.add(own.map((x) => x.place), 'integer[]')}) AS e(type, kind, actor, data, place)`;
  }

  /** `, col = $n, …` for a patch (booleans as booleans). */
  #assignments(patch: TaskPatch, p: Params): string {
    let sets = '';
    for (const [col, value] of patchAssignments(patch, (b) => b)) {
      sets += isRaw(value) ? `, ${col} = ${value.raw}` : `, ${col} = ${p.add(value, PATCH_TYPES[col] ?? 'text')}`;
    }
    return sets;
  }

  /**
   * Group commit: plain step checkpoints go into one multi-row statement, end-of-run transitions
   * into another (see batch-sql.ts); each op keeps its own guard. Writes that need more (signal
   * consumption, journal rows with a transition, an event wait) run one by one in a transaction.
   */
  writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    const [only] = ops;
    if (ops.length === 1 && only?.kind === 'step') {
      // The hot path of a plain step: one autocommit statement, one round trip (and as few
      // promise hops as possible: this is paid once per step of a lone run).
      try {
        return this.#stepWrite(this.#db, only).then((accepted) => [accepted], this.#translate);
      } catch (e) {
        return Promise.reject(translateError(e, this.description));
      }
    }
    return this.#writeBatch(ops);
  }

  /** Everything but a lone step write (see {@link writeBatch}). */
  async #writeBatch(ops: readonly WriteOp[]): Promise<WriteResult[]> {
    if (!ops.length) return [];
    const [only] = ops;
    if (ops.length === 1 && only?.kind === 'transition') return [await this.transition(only)];
    return this.#run(async () => {
      const results: WriteResult[] = new Array<WriteResult>(ops.length).fill(null);
      const steps: Array<{ op: StepWrite; at: number }> = [];
      const transitions: Array<{ op: TransitionWrite; at: number }> = [];
      const rest: Array<{ op: WriteOp; at: number }> = [];
      const transitionTasks = new Set<string>();
      ops.forEach((op, at) => {
        if (op.kind === 'step' && !op.consume) steps.push({ op, at });
        else if (op.kind === 'transition' && isBatchableTransition(op) && !transitionTasks.has(op.taskId)) {
          transitionTasks.add(op.taskId);
          transitions.push({ op, at });
        } else rest.push({ op, at });
      });
      if (steps.length) {
        const { text, values, keys } = stepBatchSql(this.#t, steps.map((s) => s.op));
        const accepted = new Set((await this.#rows(this.#db, text, values)).map((r) => `${String(r.task_id)}/${Number(r.seq)}`));
        steps.forEach((s, i) => (results[s.at] = accepted.has(keys[i] as string)));
      }
      if (transitions.length) {
        const { text, values } = transitionBatchSql(this.#t, transitions.map((x) => x.op), (e) => this.#channelOf(e));
        for (const row of await this.#rows(this.#db, text, values)) {
          const entry = transitions[Number(row.batch_ord) - 1];
          if (entry) results[entry.at] = toTaskRow(row);
        }
      }
      if (rest.length) {
        // Row locks in task id order, as every multi-row writer takes them (see batch-sql.ts), so
        // that two such transactions never deadlock; a stable sort keeps each task's ops in order.
        rest.sort((x, y) => (x.op.taskId < y.op.taskId ? -1 : x.op.taskId > y.op.taskId ? 1 : 0));
        const out = await this.#tx(async (c) => {
          const r: WriteResult[] = [];
          for (const { op } of rest) r.push(op.kind === 'step' ? await this.#stepWrite(c, op) : await this.#transition(c, op));
          return r;
        });
        rest.forEach((x, i) => (results[x.at] = out[i] as WriteResult));
      }
      return results;
    });
  }

  /**
   * The fenced journal write, one statement (see {@link plainStepSql}); one that consumes a signal
   * also marks it, in the same statement, only if the row was accepted.
   */
  #stepWrite(db: ClientBase | Pool, w: StepWrite): Promise<boolean> {
    if (w.consume) return this.#consumingStepWrite(db, w, w.consume);
    // The hot path: one statement whose text never changes (prepared once per connection); the
    // task row is locked by the fence's UPDATE, and the row count (of the log entry) says whether
    // it was accepted.
    const values = stepValues(w.step);
    values.push(w.taskId, w.epoch, stepEntryAt(w.step), `step:${w.step.status}`, stepEntry('worker', '', w.step).data);
    const text = (this.#plainStepSql ??= plainStepSql(this.#t));
    const onHot = db === this.#pool ? this.#hot.tryRun((c) => this.#query(c, text, values)) : undefined;
    return (onHot ?? this.#query(db, text, values)).then((r) => r.rowCount === 1);
  }

  /**
   * A journal write that also marks the signal it consumed, only if the row was accepted; two
   * entries (the step's, then the consumption's), actor the lease holder.
   */
  async #consumingStepWrite(db: ClientBase | Pool, w: StepWrite, consume: NonNullable<StepWrite['consume']>): Promise<boolean> {
    const t = this.#t;
    const p = new Params();
    const values = stepValues(w.step).map((v, i) => p.add(v, STEP_TYPES[i] as string));
    const task = p.add(w.taskId, 'text');
    // The step's entry (place 1; carried by its row when it is a result), then the consumption's.
    const carried = journalCarries(w.step);
    const types = carried ? ['signal:consumed'] : [`step:${w.step.status}`, 'signal:consumed'];
    const data = carried ? [signalConsumedEntry('worker', '', consume).data] : [stepEntry('worker', '', w.step).data, signalConsumedEntry('worker', '', consume).data];
    const places = carried ? [2] : [1, 2];
    const text = `WITH f AS (${appendFence(t, task, p.add(w.epoch, 'integer'), '2')}
      ), ins AS (
        INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq) SELECT ${values.join(', ')}, ${carried ? 'f.event_seq - 1' : 'NULL::integer'} FROM f
        ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
      ), consumed AS (
        UPDATE ${t.signals} SET consumed_seq = ${p.add(consume.seq, 'integer')}
        WHERE id = ${p.add(consume.signalId, 'bigint')} AND consumed_seq IS NULL AND EXISTS (SELECT 1 FROM f)
      ), log AS (
        INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT ${task}, f.event_seq - 2 + e.place, ${p.add(stepEntryAt(w.step), 'bigint')}, e.type, 'worker', coalesce(f.lease_owner, 'unknown'), e.data
        FROM f, unnest(${p.add(types, 'text[]')}, ${p.add(data, 'text[]')}, ${p.add(places, 'integer[]')}) AS e(type, data, place)
      ) SELECT count(*)::int AS n FROM f`;
    const [row] = await this.#rows(db, text, p.values);
    return row?.n === 1;
  }

  // ── Leases ───────────────────────────────────────────────────────────────────────────────

  async claim(r: ClaimRequest): Promise<ClaimedTask[]> {
    if (r.limit <= 0 || r.workflows.length === 0) return [];
    const capped = Object.keys(r.concurrency ?? {}).some((wf) => r.workflows.includes(wf));
    if (!capped) return this.#run(() => this.#claimUncapped(r));
    return this.#run(() =>
      this.#tx(async (c) => {
        const room = await this.#room(c, r);
        const picked: Array<{ id: string; status: TaskStatus; leaseOwner: string | null; event: 'claim' | 'reclaim' }> = [];
        // Locks due candidates (skipping rows other workers hold) until `limit` are picked. A row of
        // a workflow without room is skipped (it stays locked until commit); the workflow is then
        // left out of the next round, so the loop ends after at most one round per capped workflow.
        const pick = async (event: 'claim' | 'reclaim', from: readonly TaskStatus[], due: string, order: string): Promise<void> => {
          if (!from.length) return;
          for (;;) {
            const need = r.limit - picked.length;
            const allowed = r.workflows.filter((wf) => (room.get(wf) ?? 1) > 0);
            if (need <= 0 || !allowed.length) return;
            const q = new Params();
            const text = `SELECT id, status, workflow, lease_owner FROM ${this.#t.tasks}
               WHERE status IN (${sqlStatuses(from)}) AND ${due} <= ${q.add(r.now, 'bigint')} AND ${servedSql(q, allowed, r.versions)}
               AND NOT (id = ANY(${q.add(picked.map((x) => x.id), 'text[]')}))
               ORDER BY ${order} LIMIT ${q.add(need, 'integer')} FOR UPDATE SKIP LOCKED`;
            const rows = await this.#rows(c, text, q.values);
            let skipped = false;
            for (const row of rows) {
              const wf = String(row.workflow);
              const left = room.get(wf);
              if (left !== undefined) {
                if (left <= 0) {
                  skipped = true;
                  continue;
                }
                room.set(wf, left - 1);
              }
              const leaseOwner = event === 'reclaim' ? ((row.lease_owner as string | null) ?? null) : null;
              picked.push({ id: String(row.id), status: row.status as TaskStatus, leaseOwner, event });
            }
            if (!skipped || rows.length < need) return;
          }
        };
        // Expired leases first: their tasks have waited longest.
        await pick('reclaim', r.reclaim.from, 'lease_expires_at', 'lease_expires_at, id');
        await pick('claim', r.claim.from, 'run_at', 'run_at, id');
        if (!picked.length) return [];

        const p = new Params();
        const ids = picked.map((x) => x.id);
        const rows = await this.#rows(
          c,
          `WITH p AS (
             SELECT * FROM unnest(${p.add(ids, 'text[]')}, ${p.add(picked.map((x) => x.event), 'text[]')},
               ${p.add(picked.map((x) => x.status), 'text[]')},
               ${p.add(picked.map((x) => (x.event === 'reclaim' ? JSON.stringify({ previousOwner: x.leaseOwner }) : null)), 'text[]')})
               WITH ORDINALITY AS p(p_id, p_event, p_status, p_detail, p_ord)
           ), u AS (
             UPDATE ${this.#t.tasks} AS t
             SET status = CASE WHEN p.p_event = 'reclaim' THEN ${p.add(r.reclaim.to, 'text')} ELSE ${p.add(r.claim.to, 'text')} END,
               lease_owner = ${p.add(r.workerId, 'text')}, lease_expires_at = ${p.add(r.now + r.leaseMs, 'bigint')},
               epoch = t.epoch + 1, version = t.version + 1, runs = t.runs + 1, wait = NULL, wait_events = NULL,
               updated_at = ${p.add(r.now, 'bigint')}, event_seq = t.event_seq + 1
             FROM p WHERE t.id = p.p_id
             RETURNING t.*, p.p_event, p.p_status, p.p_detail, p.p_ord
           ), h AS (
             INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
             SELECT id, event_seq, updated_at, 'transition', 'worker', lease_owner,
               json_build_object('event', p_event, 'from', p_status, 'to', status, 'epoch', epoch, 'detail', p_detail::json)::text
             FROM u ORDER BY p_ord
           )
           SELECT * FROM u ORDER BY p_ord`,
          p.values,
        );
        const steps = groupBy(
          (await this.#rows(c, `SELECT * FROM ${this.#t.steps} WHERE task_id = ANY($1::text[]) ORDER BY task_id, seq`, [ids])).map(toStepRow),
          (s) => s.taskId,
        );
        const signals = groupBy(
          (await this.#rows(c, `SELECT * FROM ${this.#t.signals} WHERE task_id = ANY($1::text[]) AND consumed_seq IS NULL ORDER BY id`, [ids])).map(toSignalRow),
          (s) => s.taskId,
        );
        return rows.map((row) => {
          const task = toTaskRow(row);
          return { task, event: row.p_event as 'claim' | 'reclaim', steps: steps.get(task.id) ?? [], signals: signals.get(task.id) ?? [] };
        });
      }),
    );
  }

  /**
   * Claims without concurrency caps: one autocommit statement locks candidates with
   * `FOR UPDATE SKIP LOCKED` (expired leases first, then due tasks), takes them and appends their
   * claim entries; the journals of resumed tasks are read afterwards (a journal cannot change once
   * the claim has committed: older runs are fenced off).
   */
  async #claimUncapped(r: ClaimRequest): Promise<ClaimedTask[]> {
    const p = new Params();
    const now = p.add(r.now, 'bigint');
    const served = servedSql(p, r.workflows, r.versions);
    const limit = p.add(r.limit, 'integer');
    const reclaimTo = p.add(r.reclaim.to, 'text');
    const claimTo = p.add(r.claim.to, 'text');
    const parts: string[] = [];
    if (r.reclaim.from.length) {
      parts.push(`r AS (
        SELECT id, status, lease_owner, 0 AS pri, lease_expires_at AS due FROM ${this.#t.tasks}
        WHERE status IN (${sqlStatuses(r.reclaim.from)}) AND lease_expires_at <= ${now} AND ${served}
        ORDER BY lease_expires_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)`);
    }
    if (r.claim.from.length) {
      parts.push(`c AS (
        SELECT id, status, NULL::text AS lease_owner, 1 AS pri, run_at AS due FROM ${this.#t.tasks}
        WHERE status IN (${sqlStatuses(r.claim.from)}) AND run_at <= ${now} AND ${served}
        ORDER BY run_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)`);
    }
    if (!parts.length) return [];
    const union = [r.reclaim.from.length ? 'SELECT * FROM r' : '', r.claim.from.length ? 'SELECT * FROM c' : ''].filter(Boolean).join(' UNION ALL ');
    const rows = await this.#rows(
      this.#db,
      `WITH ${parts.join(', ')},
       p AS (SELECT * FROM (${union}) x ORDER BY pri, due, id LIMIT ${limit}),
       u AS (
         UPDATE ${this.#t.tasks} AS t
         SET status = CASE WHEN p.pri = 0 THEN ${reclaimTo} ELSE ${claimTo} END,
           lease_owner = ${p.add(r.workerId, 'text')}, lease_expires_at = ${p.add(r.now + r.leaseMs, 'bigint')},
           epoch = t.epoch + 1, version = t.version + 1, runs = t.runs + 1, wait = NULL, wait_events = NULL, updated_at = ${now},
           event_seq = t.event_seq + 1
         FROM p WHERE t.id = p.id
         RETURNING t.*, p.pri AS p_pri, p.status AS p_status, p.lease_owner AS p_owner
       ), h AS (
         INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
         SELECT id, event_seq, ${now}, 'transition', 'worker', lease_owner,
           json_build_object('event', CASE WHEN p_pri = 0 THEN 'reclaim' ELSE 'claim' END, 'from', p_status, 'to', status, 'epoch', epoch,
             'detail', CASE WHEN p_pri = 0 THEN json_build_object('previousOwner', p_owner) END)::text
         FROM u ORDER BY p_pri, id
       )
       SELECT u.*,
         EXISTS (SELECT 1 FROM ${this.#t.signals} g WHERE g.task_id = u.id AND g.consumed_seq IS NULL) AS has_signals
       FROM u ORDER BY p_pri, id`,
      p.values,
    );
    // The journal is read after the claim committed, with a fresh snapshot: a step write that
    // committed while this statement waited is included (later ones are fenced off). A first run
    // has no journal. Signals sent meanwhile are picked up when the run waits for them.
    const withSteps = rows.filter((row) => Number(row.runs) > 1).map((row) => String(row.id));
    const withSignals = rows.filter((row) => row.has_signals === true).map((row) => String(row.id));
    const [steps, signals] = await Promise.all([
      withSteps.length
        ? this.#rows(this.#db, `SELECT * FROM ${this.#t.steps} WHERE task_id = ANY($1::text[]) ORDER BY task_id, seq`, [withSteps])
        : Promise.resolve([]),
      withSignals.length
        ? this.#rows(this.#db, `SELECT * FROM ${this.#t.signals} WHERE task_id = ANY($1::text[]) AND consumed_seq IS NULL ORDER BY id`, [withSignals])
        : Promise.resolve([]),
    ]);
    const stepsBy = groupBy(steps.map(toStepRow), (x) => x.taskId);
    const signalsBy = groupBy(signals.map(toSignalRow), (x) => x.taskId);
    return rows.map((row) => {
      const task = toTaskRow(row);
      return { task, event: row.p_pri === 0 ? 'reclaim' : 'claim', steps: stepsBy.get(task.id) ?? [], signals: signalsBy.get(task.id) ?? [] };
    });
  }

  /**
   * Remaining capacity per capped workflow. Claimers of a capped workflow serialize on an advisory
   * lock (taken in name order, so two claimers never deadlock), then count leased tasks with a
   * fresh snapshot that includes every claim committed before the lock was granted.
   */
  async #room(c: ClientBase, r: ClaimRequest): Promise<Map<string, number>> {
    const room = new Map<string, number>();
    const capped = Object.entries(r.concurrency ?? {}).filter(([wf]) => r.workflows.includes(wf));
    if (!capped.length) return room;
    for (const [wf, cap] of capped) room.set(wf, cap);
    const names = capped.map(([wf]) => wf).sort();
    await c.query('SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k', [
      names.map((wf) => `stepwise:cap:${this.schema}:${wf}`),
    ]);
    const counts = await this.#rows(c, leasedCountSql(this.#t), [r.now, names]);
    for (const row of counts) room.set(String(row.workflow), (room.get(String(row.workflow)) ?? 0) - Number(row.n));
    return room;
  }

  async heartbeat(r: HeartbeatRequest): Promise<HeldTask[]> {
    if (!r.held.length) return [];
    return this.#run(async () => {
      const rows = await this.#rows(
        this.#db,
        heartbeatSql(this.#t),
        [r.now + r.leaseMs, r.held.map((h) => h.taskId), r.held.map((h) => h.epoch), r.workerId],
      );
      const byId = new Map(rows.map((row) => [String(row.id), row]));
      const out: HeldTask[] = [];
      for (const h of r.held) {
        const row = byId.get(h.taskId);
        if (!row) continue;
        byId.delete(h.taskId);
        out.push({
          taskId: h.taskId,
          status: row.status as TaskStatus,
          pauseRequested: row.pause_requested === true,
          cancelReason: (row.cancel_reason as string | null) ?? null,
        });
      }
      return out;
    });
  }

  /** When the next task of one of the workflows falls due after `after` (see {@link nextDueSql}). */
  async nextRunAt(r: NextRunRequest): Promise<number | null> {
    if (!r.workflows.length) return null;
    return this.#run(async () => {
      const [row] = await this.#rows(this.#db, nextDueSql(this.#t), [r.after, r.workflows]);
      return row ? Number(row.run_at) : null;
    });
  }

  /** One statement; tasks another transaction holds (being claimed or renewed) are skipped. */
  async expireLeases(r: ExpireRequest): Promise<number> {
    if (!r.from.length) return 0;
    return this.#run(async () => {
      const p = new Params();
      const now = p.add(r.now, 'bigint');
      const to = p.add(r.to, 'text');
      const sets = this.#assignments(r.set, p);
      const [row] = await this.#rows(
        this.#db,
        `WITH x AS (
           SELECT id AS x_id, status AS x_status, epoch AS x_epoch, lease_owner AS x_owner FROM ${this.#t.tasks}
           WHERE status IN (${sqlStatuses(r.from)}) AND lease_expires_at <= ${now}
           FOR UPDATE SKIP LOCKED
         ), u AS (
           UPDATE ${this.#t.tasks} AS t SET status = ${to}, version = t.version + 1, updated_at = ${now}, event_seq = t.event_seq + 1${sets}
           FROM x WHERE t.id = x.x_id RETURNING t.id, t.event_seq
         ), h AS (
           INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
           SELECT x_id, u.event_seq, ${now}, 'transition', 'system', 'lease-expiry',
             json_build_object('event', ${p.add(r.event, 'text')}, 'from', x_status, 'to', ${to},
               'detail', json_build_object('reason', 'lease expired', 'previousOwner', x_owner))::text
           FROM x JOIN u ON u.id = x.x_id
         )
         SELECT count(*)::int AS n FROM u`,
        p.values,
      );
      return Number(row?.n ?? 0);
    });
  }

  // ── Signals and workflows ────────────────────────────────────────────────────────────────

  /**
   * Locks the task row first (so a concurrent transition that sets `wait_events` is either seen by
   * the wake-up UPDATE, or sees this signal: see {@link PostgresStore.transition}). A new signal
   * bumps the task's log counter and appends its `signal:received` entry.
   */
  async insertSignal(s: SignalWrite): Promise<{ created: boolean } | null> {
    // The entry's data after its signal id (known only once the row is inserted).
    const prefix = '{"signalId":0';
    const receivedTail = signalReceivedEntry(s.actorKind, s.actorId, { signalId: 0, name: s.name, payload: s.payload, idempotencyKey: s.idempotencyKey }).data?.slice(prefix.length);
    return this.#run(() =>
      this.#tx(async (c) => {
        const [task] = await this.#rows(c, `SELECT 1 FROM ${this.#t.tasks} WHERE id = $1 FOR NO KEY UPDATE`, [s.taskId]);
        if (!task) return null;
        const [row] = await this.#rows(
          c,
          `WITH ins AS (
             INSERT INTO ${this.#t.signals} (task_id, name, payload, idempotency_key, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (task_id, idempotency_key) DO NOTHING RETURNING id
           ), due AS (
             UPDATE ${this.#t.tasks} SET event_seq = event_seq + 1,
               run_at = CASE WHEN strpos(wait_events, '|' || $2 || '|') > 0 THEN $5 ELSE run_at END
             WHERE id = $1 AND EXISTS (SELECT 1 FROM ins) RETURNING event_seq
           ), log AS (
             INSERT INTO ${this.#t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
             SELECT $1, due.event_seq, $5, 'signal:received', $8::text, $9::text, '{"signalId":' || ins.id::text || $10::text FROM ins, due
           )
           SELECT count(*)::int AS n, CASE WHEN count(*) > 0 AND $7::text IS NOT NULL THEN pg_notify($6, $7) END AS notified FROM ins`,
          [s.taskId, s.name, s.payload, s.idempotencyKey, s.at, this.#channelOf(s.notify), payload(s.notify), s.actorKind, s.actorId, receivedTail],
        );
        return { created: row?.n === 1 };
      }),
    );
  }

  async registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void> {
    if (!workflows.length) return;
    // One row per (name, version): first registration time, last seen time (as a loop of upserts would).
    const merged = new Map<string, { name: string; version: string; first: number; last: number }>();
    for (const w of workflows) {
      const key = JSON.stringify([w.name, w.version]);
      const m = merged.get(key);
      if (m) m.last = w.at;
      else merged.set(key, { name: w.name, version: w.version, first: w.at, last: w.at });
    }
    const rows = [...merged.values()];
    await this.#run(() =>
      this.#db.query(
        `INSERT INTO ${this.#t.workflows} (name, version, registered_at, last_seen_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
         ON CONFLICT (name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
        [rows.map((r) => r.name), rows.map((r) => r.version), rows.map((r) => r.first), rows.map((r) => r.last)],
      ),
    );
  }

  async listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>> {
    return this.#run(async () =>
      (
        await this.#rows(this.#db, `SELECT name, version, last_seen_at FROM ${this.#t.workflows} ORDER BY name COLLATE "C", version COLLATE "C"`)
      ).map((r) => ({ name: String(r.name), version: String(r.version), lastSeenAt: Number(r.last_seen_at) })),
    );
  }

  // ── Wake-ups ─────────────────────────────────────────────────────────────────────────────

  async notify(event: WakeEvent): Promise<void> {
    await this.#run(() => this.#db.query('SELECT pg_notify($1, $2)', [this.#channelOf(event), JSON.stringify(event)]));
  }

  /** The channel an event travels on (see {@link topicOf}). */
  #channelOf(event: WakeEvent | undefined): string {
    return this.#topicChannel(event ? topicOf(event) : 'work');
  }

  #topicChannel(topic: WakeTopic): string {
    return topic === 'settled' ? this.settledChannel : this.channel;
  }

  /**
   * LISTENs to one topic's channel on a dedicated connection (not from the pool). If it drops, it
   * reconnects with backoff and then calls `listener` once with `taskId: '*'` (reason `'task'`, or
   * `'settled'` for that topic), since notifications sent while it was down are lost. Throws if the
   * first connection fails.
   */
  async subscribe(listener: (event: WakeEvent) => void, topic: WakeTopic = 'work'): Promise<() => Promise<void>> {
    if (!this.#pool) throw new ClosedError('The PostgreSQL store');
    const channel = this.#topicChannel(topic);
    const missed: WakeEvent = { reason: topic === 'settled' ? 'settled' : 'task', taskId: '*' };
    const connect = (): Client => new this.#pg.Client({
      connectionString: this.#url, keepAlive: true, application_name: 'stepwise-listen', connectionTimeoutMillis: 10_000,
    });
    const l = new WakeListener(connect, channel, missed, listener);
    this.#listeners.add(l);
    try {
      await this.#run(() => l.start());
    } catch (e) {
      this.#listeners.delete(l);
      await l.stop();
      throw e;
    }
    return async () => {
      this.#listeners.delete(l);
      await l.stop();
    };
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const list = out.get(key(item));
    if (list) list.push(item);
    else out.set(key(item), [item]);
  }
  return out;
}
