/**
 * @module postgres/idempotency
 * Internal: not part of the public API.
 * Idempotency records in PostgreSQL (table `idempotency`, see sql/postgres/000006_idempotency.sql).
 * A new key costs one autocommit `INSERT … ON CONFLICT DO NOTHING`: of two concurrent inserters of
 * one key, the second waits on the unique index until the first commits and then inserts nothing.
 * An existing record is decided on under its row lock (`SELECT … FOR UPDATE`) in a transaction, so
 * that two acquirers of an expired or dead owner's record cannot both take it over. Owner writes
 * are one guarded UPDATE each (`WHERE owner = $ AND status = 'in_progress'`).
 */
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';
import { DB_NOW_MS } from './sql-text.ts';
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

const COLUMNS = 'key, status, fingerprint, owner, lease_expires_at, result, error, task_id, created_at, updated_at, expires_at';
const values = (r: IdempotencyRecord): unknown[] => [r.key, r.status, r.fingerprint, r.owner, r.leaseExpiresAt, r.result, r.error, r.taskId, r.createdAt, r.updatedAt, r.expiresAt];

export class PostgresIdempotency implements IdempotencyBackend {
  readonly kind = 'postgres' as const;
  readonly #c: PgContext;

  constructor(c: PgContext) {
    this.#c = c;
  }

  get #t(): string {
    return this.#c.t.idempotency;
  }

  async acquire(req: AcquireRequest): Promise<AcquireResult> {
    const c = this.#c;
    return run(c, async () => {
      for (;;) {
        // Leases are set and judged by the database's clock (the callers' clocks may differ).
        const fresh = acquiredRecord(null, 'new', { ...req, leaseNow: 0 });
        const inserted = await rows(
          c,
          poolOf(c),
          `INSERT INTO ${this.#t} (${COLUMNS}) VALUES ($1, $2, $3, $4, ${DB_NOW_MS} + $5::bigint, $6, $7, $8, $9, $10, $11) ON CONFLICT (key) DO NOTHING RETURNING 1 AS ok`,
          values(fresh),
        );
        if (inserted.length) return acquireResult(null, 'new');
        const decided = await tx(c, async (client) => {
          const [row] = (await client.query(`SELECT *, ${DB_NOW_MS} AS db_now_ms FROM ${this.#t} WHERE key = $1 FOR UPDATE`, [req.key])).rows as Record<string, unknown>[];
          if (!row) return null; // purged meanwhile: insert again
          const found = recordFromRow(row);
          const judged = { ...req, leaseNow: Number(row.db_now_ms) };
          const decision = decideAcquire(found, judged);
          if (decision !== 'refuse') {
            const r = acquiredRecord(found, decision, judged);
            await client.query(
              `UPDATE ${this.#t} SET status = $2, fingerprint = $3, owner = $4, lease_expires_at = $5, result = $6, error = $7, task_id = $8,
                 created_at = $9, updated_at = $10, expires_at = $11 WHERE key = $1`,
              values(r),
            );
          }
          return acquireResult(found, decision);
        });
        if (decided) return decided;
      }
    });
  }

  async renew(key: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
    const c = this.#c;
    return run(
      c,
      async () =>
        (
          await rows(
            c,
            poolOf(c),
            `UPDATE ${this.#t} SET lease_expires_at = ${DB_NOW_MS} + $5::bigint, expires_at = greatest(expires_at, $3::bigint), updated_at = $4
       WHERE key = $1 AND owner = $2 AND status = 'in_progress' RETURNING 1 AS ok`,
            [key, owner, now + leaseMs, now, leaseMs],
          )
        ).length === 1,
    );
  }

  complete(key: string, owner: string, result: string | null, now: number, ttlMs: number): Promise<boolean> {
    return this.#settle(key, owner, 'completed', result, null, now, ttlMs);
  }

  fail(key: string, owner: string, error: string, now: number, ttlMs: number): Promise<boolean> {
    return this.#settle(key, owner, 'failed', null, error, now, ttlMs);
  }

  async #settle(key: string, owner: string, status: string, result: string | null, error: string | null, now: number, ttlMs: number): Promise<boolean> {
    const c = this.#c;
    return run(
      c,
      async () =>
        (
          await rows(
            c,
            poolOf(c),
            `UPDATE ${this.#t} SET status = $3, result = $4, error = $5, owner = NULL, lease_expires_at = NULL, updated_at = $6, expires_at = $7
       WHERE key = $1 AND owner = $2 AND status = 'in_progress' RETURNING 1 AS ok`,
            [key, owner, status, result, error, now, now + ttlMs],
          )
        ).length === 1,
    );
  }

  async get(key: string): Promise<IdempotencyRecord | null> {
    const c = this.#c;
    const [row] = await run(c, () => rows(c, poolOf(c), `SELECT * FROM ${this.#t} WHERE key = $1`, [key]));
    return row ? recordFromRow(row) : null;
  }

  async purge(now: number, limit: number): Promise<number> {
    const c = this.#c;
    return run(
      c,
      async () =>
        (
          await rows(
            c,
            poolOf(c),
            `DELETE FROM ${this.#t} WHERE key IN (SELECT key FROM ${this.#t}
         WHERE expires_at <= $1 AND (status <> 'in_progress' OR lease_expires_at <= ${DB_NOW_MS}) ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING 1 AS ok`,
            [now, limit],
          )
        ).length,
    );
  }
}
