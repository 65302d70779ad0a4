/**
 * @module postgres/connection
 * Internal: not part of the public API.
 * The connection side of the PostgreSQL store: the context every operation receives (pool, the
 * kept connection for lone step writes, prepared statement names, listeners, table names), the
 * helpers that run statements and transactions on it, and the one place where driver errors
 * become Stepwise errors. `pg` is an optional peer dependency, loaded by {@link loadPg}.
 */
import { createRequire } from 'node:module';
import type { ClientBase, Pool, QueryResult } from 'pg';
import { migratePostgres } from './migrate.ts';
import { tablesOf, type Tables } from './sql-text.ts';
import type { WakeListener } from './wake.ts';
import { HotConnection } from './hot-connection.ts';
import { ConnectionWatchdog } from './watchdog.ts';
import { ClosedError, StepwiseError, StoreUnavailableError } from '../errors.ts';
import { CLIENT_DEADLINE_MESSAGE, DEFAULT_DEADLINES, clientSettings, destroySocket, endClient, type PgDeadlines } from './deadlines.ts';
import { checkApplied } from '../migrations.ts';
import { postgresMigrations } from '../generated/sql.ts';
import { quoteIdent } from './migrate.ts';
import { translateRefusal } from './refusals.ts';
import { rowObjects, type Raw } from './row-objects.ts';

export type { Raw } from './row-objects.ts';
export type PgModule = typeof import('pg');
/** Where a statement runs: the pool (autocommit) or a client inside a transaction. */
export type Db = ClientBase | Pool;

/** How many distinct statement texts are prepared by name (see {@link query}). */
const MAX_NAMED_STATEMENTS = 500;
/** Transactions that lose a deadlock or serialization race are run again, at most this often. */
export const TX_ATTEMPTS = 3;

/** The state of one store, shared by its operations (see store.ts). */
export interface PgContext {
  readonly description: string;
  /** The schema holding the tables (unquoted). */
  readonly schema: string;
  /** The LISTEN/NOTIFY channel of this schema's work. */
  readonly channel: string;
  /** The LISTEN/NOTIFY channel of this schema's finished tasks. */
  readonly settledChannel: string;
  readonly url: string;
  readonly pg: PgModule;
  /** Null once closed. */
  pool: Pool | null;
  readonly poolSize: number;
  /** How long connections and statements may take (see deadlines.ts). */
  readonly deadlines: PgDeadlines;
  /** Pooled connections open now (closed by force if their goodbye is not answered). */
  readonly clients: Set<ClientBase>;
  /** A connection kept for lone step checkpoints (see hot-connection.ts). */
  readonly hot: HotConnection;
  /** Destroys connections whose backend is gone (half-open after a restart; see watchdog.ts). */
  readonly watchdog: ConnectionWatchdog;
  readonly listeners: Set<WakeListener>;
  /** Statement text → prepared statement name; one map per store, hence per pool. */
  readonly statementNames: Map<string, string>;
  /** Quoted table names. */
  readonly t: Tables;
  /** {@link run}'s translation, as a rejection handler (built once: the hot path uses it). */
  readonly translate: (e: unknown) => never;
}

/** Opens the pool of a store (nothing connects until the first statement). */
export function openContext(url: string, schema: string, poolSize: number, deadlines: PgDeadlines = DEFAULT_DEADLINES): PgContext {
  const pg = loadPg();
  const description = `${printableUrl(url)} (schema ${schema})`;
  // Generic plans: the statements are prepared once per connection and their parameters are arrays
  // whose sizes vary; re-planning each execution (custom plans) would cost more than running it.
  const pool = new pg.Pool({
    ...clientSettings(url, deadlines, 'stepwise'),
    max: poolSize,
    options: '-c plan_cache_mode=force_generic_plan',
  });
  // An idle pooled connection that dies is dropped by the pool; the next query opens a new one.
  pool.on('error', () => undefined);
  const clients = new Set<ClientBase>();
  pool.on('connect', (client) => clients.add(client));
  pool.on('remove', (client) => clients.delete(client));
  const listeners = new Set<WakeListener>();
  const watchdog = new ConnectionWatchdog(
    () => [...clients, ...[...listeners].flatMap((l) => l.connection ?? [])],
    () => new pg.Client({ ...clientSettings(url, deadlines, 'stepwise-probe'), query_timeout: Math.min(deadlines.statementTimeoutMs, 5000) }),
  );
  watchdog.start();
  return {
    description,
    schema,
    channel: `${schema}_wake`,
    settledChannel: `${schema}_done`,
    url,
    pg,
    pool,
    poolSize,
    deadlines,
    clients,
    hot: new HotConnection(pool, poolSize, isUnusableConnection),
    watchdog,
    listeners,
    statementNames: new Map(),
    t: tablesOf(schema),
    translate: (e: unknown): never => {
      throw translateError(e, description);
    },
  };
}

/** The pool, or ClosedError once the store is closed. */
export function poolOf(c: PgContext): Pool {
  if (!c.pool) throw new ClosedError('The PostgreSQL store');
  return c.pool;
}

/** Runs `fn(...args)`, translating driver errors at this one boundary. */
export async function run<T, A extends unknown[] = []>(c: PgContext, fn: (...args: A) => Promise<T>, ...args: A): Promise<T> {
  try {
    return await fn(...args);
  } catch (e) {
    throw translateError(e, c.description);
  }
}

/**
 * Runs a statement as a named prepared statement (parsed and planned once per connection, which
 * halves the cost of a step write). Texts depend only on the shape of a write (which patch
 * columns, whether it has steps), so there are few of them; past a bound, statements go unnamed.
 */
export async function rows(c: PgContext, db: Db, text: string, values: readonly unknown[] = []): Promise<Raw[]> {
  return (await query(c, db, text, values)).rows;
}

export function query(c: PgContext, db: Db, text: string, values: readonly unknown[]): Promise<QueryResult<Raw>> {
  let name = c.statementNames.get(text);
  if (name === undefined && c.statementNames.size < MAX_NAMED_STATEMENTS) {
    name = `stepwise_${c.statementNames.size + 1}`;
    c.statementNames.set(text, name);
  }
  // Rows come as arrays and become objects of a fixed shape (see row-objects.ts).
  const config = { name, text, values: values as unknown[], rowMode: 'array' as const };
  if (db !== c.pool) return db.query<unknown[]>(config).then(withObjects);
  // Through the pool, a connection whose prepared statement went stale (a migration changed a
  // column's type) is destroyed by the pool on the error: run it again on another one.
  const pool = db;
  const attempt = (left: number): Promise<QueryResult<Raw>> =>
    pool.query<unknown[]>(config).then(withObjects, (e: unknown) => (left > 0 && isStalePlan(e) ? attempt(left - 1) : Promise.reject(e)));
  return attempt(c.poolSize);
}

function withObjects(r: QueryResult<unknown[]>): QueryResult<Raw> {
  // A text of several statements (unnamed, without parameters) answers one result per statement.
  if (Array.isArray(r)) for (const each of r as QueryResult<unknown[]>[]) withObjects(each);
  else (r as unknown as QueryResult<Raw>).rows = rowObjects(r.fields, r.rows);
  return r as unknown as QueryResult<Raw>;
}

/** `fn` in one transaction on one pooled client; re-run if it loses a deadlock. */
export async function tx<T>(c: PgContext, fn: (client: ClientBase) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await poolOf(c).connect();
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

/**
 * Brings the schema up to date. The common case, a schema already current, is one read under the
 * usual deadlines; only pending migrations run on a connection of their own without a statement
 * timeout (a migration may rewrite a large table), waiting for other migrators on a lock.
 */
export async function migrate(c: PgContext, now: number): Promise<void> {
  await run(c, async () => {
    if (await isCurrent(c)) return;
    const client = new c.pg.Client({ ...clientSettings(c.url, c.deadlines, 'stepwise-migrate'), statement_timeout: 0, idle_in_transaction_session_timeout: 0, query_timeout: 0 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await migratePostgres(client, c.schema, now);
    } finally {
      await endClient(client);
    }
  });
}

/** Whether every migration this version ships is applied (and none rules this version out). */
async function isCurrent(c: PgContext): Promise<boolean> {
  let applied: Raw[];
  try {
    applied = (await poolOf(c).query<Raw>(`SELECT id, name, breaking, checksum FROM ${quoteIdent(c.schema)}.migrations ORDER BY id`)).rows;
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000' || code === '42703') return false; // no schema or table yet, or an older one
    throw e;
  }
  const rowsOf = applied.map((a) => ({ id: Number(a.id), name: String(a.name), breaking: a.breaking === true, checksum: (a.checksum as string | null) ?? null }));
  checkApplied(`The database schema ${quoteIdent(c.schema)}`, rowsOf, postgresMigrations);
  const done = new Set(rowsOf.map((a) => a.id));
  return postgresMigrations.every((m) => done.has(m.id));
}

export async function close(c: PgContext): Promise<void> {
  const pool = c.pool;
  if (!pool) return;
  c.pool = null;
  c.watchdog.stop();
  c.hot.close();
  const listeners = [...c.listeners];
  c.listeners.clear();
  await Promise.all(listeners.map((l) => l.stop()));
  const open = c.clients;
  await pool.end();
  // A connection whose goodbye is not acknowledged within a second (a network that drops packets)
  // is closed by force: its socket would keep the process alive.
  if (open.size) {
    const ended: Pool = pool;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        ended.off('remove', removed);
        resolve();
      };
      const removed = (): void => void (open.size || done());
      const timer = setTimeout(done, 1000);
      ended.on('remove', removed);
      removed();
    });
    for (const client of open) destroySocket(client);
    open.clear();
  }
}

let pgModule: PgModule | undefined;
export function loadPg(): PgModule {
  if (pgModule) return pgModule;
  try {
    pgModule = createRequire(import.meta.url)('pg') as PgModule;
  } catch (e) {
    const missing = (e as { code?: unknown }).code === 'MODULE_NOT_FOUND';
    throw new StoreUnavailableError(
      missing ? 'The PostgreSQL store needs the "pg" package, which is not installed: npm install pg' : `The "pg" package failed to load: ${(e as Error).message}`,
      { cause: e },
    );
  }
  return pgModule;
}

const CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * Whether a driver error means "cannot talk to the database" (rather than a bad statement):
 * socket errors, SQLSTATE class 08 (connection exception), 57P01-03 (server shutting down or
 * starting), 53300 (too many connections), 28xxx (authentication), 3D000 (no such database).
 */
export function isConnectionError(e: unknown): boolean {
  if (typeof e !== 'object' || e === null) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (CONNECTION_ERRNOS.has(code)) return true;
    if (/^(08|28)/.test(code) || ['57P01', '57P02', '57P03', '53300', '3D000'].includes(code)) return true;
  }
  const message = (e as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    (message === CLIENT_DEADLINE_MESSAGE || /connection terminated|timeout exceeded when trying to connect|timeout expired|not queryable|connection error/i.test(message))
  );
}

/**
 * Whether a connection must not be used again: it is broken, or one of its prepared statements was
 * planned against a column type that a migration has since changed (PostgreSQL then fails that
 * statement on that connection every time: "cached plan must not change result type").
 */
export function isUnusableConnection(e: unknown): boolean {
  return isConnectionError(e) || isStalePlan(e);
}

export function isStalePlan(e: unknown): boolean {
  const { code, message } = (e ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && /cached plan must not change result type/.test(message);
}

export function isRetryableConflict(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** The one place where driver errors become Stepwise errors. */
export function translateError(e: unknown, description: string): unknown {
  if (e instanceof StepwiseError) return e;
  if (isConnectionError(e)) {
    const message = (e as Error).message === CLIENT_DEADLINE_MESSAGE ? 'no answer within the statement deadline (the network may be down)' : (e as Error).message;
    return new StoreUnavailableError(`PostgreSQL (${description}) is unavailable: ${message}`, { cause: e });
  }
  return translateRefusal(e, description);
}

/** `postgres://user@host:port/db`: the URL without password or query string. */
export function printableUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username ? `${u.username}@` : ''}${u.host}${u.pathname}`;
  } catch {
    return 'postgres://…';
  }
}
