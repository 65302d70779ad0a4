/**
 * @module sqlite/idempotency
 * Internal: not part of the public API.
 * Idempotency records in the SQLite file (table `stepwise_idempotency`, see
 * sql/sqlite/000006_idempotency.sql). Every write runs in the store's `BEGIN IMMEDIATE`
 * transaction, so a read and the write that follows it are one atomic step across processes; the
 * primary key is the unique index behind it.
 */
import type Database from 'better-sqlite3';
import {
  acquireResult,
  acquiredRecord,
  decideAcquire,
  recordFromRow,
  type AcquireRequest,
  type AcquireResult,
  type IdempotencyBackend,
  type IdempotencyRecord,
} from '../store/idempotency.ts';

const UPSERT = `INSERT INTO stepwise_idempotency
  (key, status, fingerprint, owner, lease_expires_at, result, error, task_id, created_at, updated_at, expires_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (key) DO UPDATE SET status = excluded.status, fingerprint = excluded.fingerprint, owner = excluded.owner,
    lease_expires_at = excluded.lease_expires_at, result = excluded.result, error = excluded.error, task_id = excluded.task_id,
    created_at = excluded.created_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at`;

export class SqliteIdempotency implements IdempotencyBackend {
  readonly kind = 'sqlite' as const;
  readonly #db: () => Database.Database;
  readonly #tx: <T>(fn: () => T) => T;

  /** @param tx runs `fn` in the store's write transaction, translating driver errors. */
  constructor(db: () => Database.Database, tx: <T>(fn: () => T) => T) {
    this.#db = db;
    this.#tx = tx;
  }

  readonly #statements = new Map<string, Database.Statement>();

  #stmt(sql: string): Database.Statement {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.#db().prepare(sql);
      this.#statements.set(sql, s);
    }
    return s;
  }

  #find(key: string): IdempotencyRecord | null {
    const row = this.#stmt('SELECT * FROM stepwise_idempotency WHERE key = ?').get(key) as Record<string, unknown> | undefined;
    return row ? recordFromRow(row) : null;
  }

  async acquire(req: AcquireRequest): Promise<AcquireResult> {
    return this.#tx(() => {
      const found = this.#find(req.key);
      const decision = decideAcquire(found, req);
      if (decision !== 'refuse') {
        const r = acquiredRecord(found, decision, req);
        this.#stmt(UPSERT).run(r.key, r.status, r.fingerprint, r.owner, r.leaseExpiresAt, r.result, r.error, r.taskId, r.createdAt, r.updatedAt, r.expiresAt);
      }
      return acquireResult(found, decision);
    });
  }

  async renew(key: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
    return this.#tx(
      () =>
        this.#stmt(
          `UPDATE stepwise_idempotency SET lease_expires_at = ?, expires_at = max(expires_at, ?), updated_at = ?
         WHERE key = ? AND owner = ? AND status = 'in_progress'`,
        ).run(now + leaseMs, now + leaseMs, now, key, owner).changes === 1,
    );
  }

  async complete(key: string, owner: string, result: string | null, now: number, ttlMs: number): Promise<boolean> {
    return this.#settle(key, owner, 'completed', result, null, now, ttlMs);
  }

  async fail(key: string, owner: string, error: string, now: number, ttlMs: number): Promise<boolean> {
    return this.#settle(key, owner, 'failed', null, error, now, ttlMs);
  }

  #settle(key: string, owner: string, status: 'completed' | 'failed', result: string | null, error: string | null, now: number, ttlMs: number): boolean {
    return this.#tx(
      () =>
        this.#stmt(
          `UPDATE stepwise_idempotency SET status = ?, result = ?, error = ?, owner = NULL, lease_expires_at = NULL, updated_at = ?, expires_at = ?
         WHERE key = ? AND owner = ? AND status = 'in_progress'`,
        ).run(status, result, error, now, now + ttlMs, key, owner).changes === 1,
    );
  }

  async get(key: string): Promise<IdempotencyRecord | null> {
    return this.#find(key);
  }

  async purge(now: number, limit: number): Promise<number> {
    return this.#tx(
      () =>
        this.#stmt(
          `DELETE FROM stepwise_idempotency WHERE key IN
           (SELECT key FROM stepwise_idempotency WHERE expires_at <= ? AND (status <> 'in_progress' OR lease_expires_at <= ?) ORDER BY expires_at LIMIT ?)`,
        ).run(now, now, limit).changes,
    );
  }
}
