/**
 * @module store/idempotency
 * The contract of an idempotency record store: what `engine.idempotency.run` needs from a backend
 * (the engine's database through its store, or Redis). A record is keyed by the caller's key and is
 * `in_progress` (an owner runs the operation, under a lease it renews), `completed` (its result is
 * kept until `expiresAt` and returned to every repeat) or `failed` (a repeat may run it again).
 *
 * `acquire` is the one atomic decision: it either makes the caller the owner (of a new key, of an
 * expired or failed record, of a record whose owner's lease ran out — a take-over — or of one the
 * same owner token already holds), or reports what is there. Writes by an owner (`renew`,
 * `complete`, `fail`) are guarded by its token: an owner that was taken over cannot overwrite the
 * new owner's record. Backends know storage, not the rules about fingerprints or waiting; those
 * are in `run.ts`.
 */

export type RecordStatus = 'in_progress' | 'completed' | 'failed';

/** A record as a backend stores it (JSON as text, times in ms since the epoch). */
export interface IdempotencyRecord {
  key: string;
  status: RecordStatus;
  fingerprint: string | null;
  owner: string | null;
  leaseExpiresAt: number | null;
  /** JSON text of the result (`null` stands for `undefined`), when completed. */
  result: string | null;
  /** JSON text of a SerializedError, when failed. */
  error: string | null;
  taskId: string | null;
  createdAt: number;
  updatedAt: number;
  expiresAt: number;
}

export interface AcquireRequest {
  key: string;
  /** The caller's token: the record's owner if it is acquired. */
  owner: string;
  fingerprint: string | null;
  now: number;
  /**
   * The record store's own clock, which leases are judged and set by (a store shared by machines
   * whose clocks differ must not let a fast caller end a live owner's lease); `now` if absent.
   */
  leaseNow?: number;
  /** How long the owner is presumed alive without renewing. */
  leaseMs: number;
  /** How long the record is kept if the owner dies without completing it. */
  ttlMs: number;
  taskId: string | null;
}

export type AcquireResult =
  /**
   * The caller owns the record now. `previous` is what it replaced: a dead owner's record
   * (`takeover`), a failed or expired one, or nothing (a new key).
   */
  | { acquired: true; takeover: boolean; previous: IdempotencyRecord | null }
  /** Someone else's record stands: completed, or in progress under a live lease. */
  | { acquired: false; record: IdempotencyRecord };

export interface IdempotencyBackend {
  /** `database` (the engine's store) or `redis`: for messages and events. */
  readonly kind: 'sqlite' | 'postgres' | 'redis';
  acquire(request: AcquireRequest): Promise<AcquireResult>;
  /** Extends the owner's lease; `false` if it is no longer the owner (taken over, or gone). */
  renew(key: string, owner: string, now: number, leaseMs: number): Promise<boolean>;
  /** Stores the result, kept until `now + ttlMs`; `false` if `owner` is no longer the owner. */
  complete(key: string, owner: string, result: string | null, now: number, ttlMs: number): Promise<boolean>;
  /** Marks the record failed (a repeat may run again), kept until `now + ttlMs`; guarded like `complete`. */
  fail(key: string, owner: string, error: string, now: number, ttlMs: number): Promise<boolean>;
  /** The record under `key` (expired ones included), or null. */
  get(key: string): Promise<IdempotencyRecord | null>;
  /** Deletes up to `limit` records that expired before `now`; returns how many. */
  purge(now: number, limit: number): Promise<number>;
}

/**
 * What `acquire` does with the record it found (the same rule on every backend):
 * - `new`: there is none; `replace`: it completed or failed long enough ago to be forgotten, or it
 *   failed (a repeat may run again); `reenter`: the same owner asks again (a task resuming its own
 *   step); `takeover`: its owner's lease ran out (the owner crashed or hung);
 * - `refuse`: it stands — completed, in progress under a live lease, or in progress for a
 *   request with another fingerprint (that is never taken over: the run layer reports a conflict).
 */
export type AcquireDecision = 'new' | 'replace' | 'reenter' | 'takeover' | 'refuse';

export function decideAcquire(found: IdempotencyRecord | null, req: AcquireRequest): AcquireDecision {
  if (!found) return 'new';
  if (found.status !== 'in_progress' && found.expiresAt <= req.now) return 'replace';
  if (found.status === 'failed') return 'replace';
  if (found.status === 'completed') return 'refuse';
  if (!fingerprintsMatch(found.fingerprint, req.fingerprint)) return 'refuse';
  if (found.owner === req.owner) return 'reenter';
  return (found.leaseExpiresAt ?? 0) <= (req.leaseNow ?? req.now) ? 'takeover' : 'refuse';
}

/** Two requests are the same operation unless both carry fingerprints and those differ. */
export function fingerprintsMatch(a: string | null, b: string | null): boolean {
  return a === null || b === null || a === b;
}

/** The record an acquirer writes: in progress, owned by it, under a fresh lease. */
export function acquiredRecord(found: IdempotencyRecord | null, decision: AcquireDecision, req: AcquireRequest): IdempotencyRecord {
  const keepsAge = found && (decision === 'reenter' || decision === 'takeover');
  return {
    key: req.key,
    status: 'in_progress',
    fingerprint: req.fingerprint ?? (keepsAge ? found.fingerprint : null),
    owner: req.owner,
    leaseExpiresAt: (req.leaseNow ?? req.now) + req.leaseMs,
    result: null,
    error: null,
    taskId: req.taskId,
    createdAt: keepsAge ? found.createdAt : req.now,
    updatedAt: req.now,
    expiresAt: req.now + Math.max(req.ttlMs, req.leaseMs),
  };
}

/** The result of `acquire` for a decision. */
export function acquireResult(found: IdempotencyRecord | null, decision: AcquireDecision): AcquireResult {
  if (decision === 'refuse') return { acquired: false, record: found as IdempotencyRecord };
  return { acquired: true, takeover: decision === 'takeover', previous: found };
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const text = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/** A stored row (both stores use the same column names) as a record. */
export function recordFromRow(r: Record<string, unknown>): IdempotencyRecord {
  return {
    key: String(r.key),
    status: r.status as IdempotencyRecord['status'],
    fingerprint: text(r.fingerprint),
    owner: text(r.owner),
    leaseExpiresAt: num(r.lease_expires_at),
    result: text(r.result),
    error: text(r.error),
    taskId: text(r.task_id),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    expiresAt: Number(r.expires_at),
  };
}

/** The idempotency records kept in the store's own database. */
export interface IdempotencyStore {
  /** The idempotency records kept in this database (see `src/idempotency/`). */
  idempotencyRecords?(): IdempotencyBackend;
}
