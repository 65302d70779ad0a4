/**
 * @module idempotency/run
 * `engine.idempotency.run(key, fn, options)`: runs `fn` once per key across processes, machines
 * and tasks, on an {@link IdempotencyBackend} (the engine's database, or Redis).
 *
 * - The first caller of a key becomes its owner (the record is `in_progress`) and runs `fn`,
 *   renewing its lease while `fn` runs; `fn`'s JSON result is stored (`completed`) and every
 *   repeat within `ttl` gets that result without running `fn`. If `fn` throws, the record is
 *   `failed` and a repeat runs `fn` again.
 * - A repeat while the owner runs waits for its result (`whileRunning: 'wait'`, the default) or
 *   gets IdempotencyInProgressError (`'error'`). A repeat whose `fingerprint` differs from the
 *   first request's is a ConflictError (CONFLICT): the key is being reused for other work.
 * - An owner that dies (a crashed process) stops renewing: once its lease has run out, the next
 *   caller takes the record over and runs `fn` (a take-over). So `fn` is at-least-once across
 *   crashes; pass `key` on to the system it calls to make that exactly-once there.
 *
 * Every hit, conflict and take-over reaches observers (`onIdempotency`) and, for a record of a
 * task, is appended to the task's log (`idempotency:hit` / `:conflict` / `:takeover`).
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { toMs, type Duration } from '../duration.ts';
import { ConflictError, IdempotencyInProgressError, InvalidArgumentError, StoreUnavailableError, coerceError, isStepwiseError } from '../errors.ts';
import { decodeJson, encodeError, encodeJson } from '../serialize.ts';
import type { ActorKind, NewEvent } from '../store.ts';
import type { IdempotencyEvent } from '../task-events/observed.ts';
import { checkKey, fingerprintOf } from './keys.ts';
import { fingerprintsMatch, type IdempotencyBackend, type IdempotencyRecord } from './records.ts';

export interface IdempotencyRunOptions {
  /**
   * How long a completed (or failed) record is kept: repeats within it get the stored result.
   * @defaultValue '24h'
   */
  ttl?: Duration;
  /**
   * What a repeat does while another caller runs the key: `wait` for its result (or for its lease
   * to run out, then take over), or `error` at once with IdempotencyInProgressError.
   * @defaultValue 'wait'
   */
  whileRunning?: 'wait' | 'error';
  /**
   * The request's parameters (any JSON value; digested, not stored): a repeat of the key with a
   * different fingerprint is a ConflictError instead of a hit. Without it, keys alone decide.
   */
  fingerprint?: unknown;
  /**
   * How long the owner is presumed alive without renewing (it renews every third of it while
   * `fn` runs). Shorter: a crashed owner's work is taken over sooner; too short for a process
   * that pauses (a long GC, a stalled event loop): a live owner is taken over and `fn` runs twice.
   * @defaultValue '30s'
   */
  lease?: Duration;
  /** Stops waiting (`whileRunning: 'wait'`) and is passed on to `fn`. */
  signal?: AbortSignal;
  /** The task this operation belongs to: its hits, conflicts and take-overs go to the task's log. */
  taskId?: string;
}

/** What `fn` receives. */
export interface IdempotencyRunContext {
  readonly key: string;
  /** Fires when `options.signal` does, or when the record was taken over from this caller. */
  readonly signal: AbortSignal;
  /** This call took the record over from an owner whose lease ran out (it may have done part of the work). */
  readonly takeover: boolean;
}

export type { IdempotencyEvent } from '../task-events/observed.ts';

/** The host the engine uses to record and report what records do. */
export interface IdempotencyHost {
  clock: Clock;
  /** Tells the engine's observers of a hit, a conflict or a take-over (`Observer.onIdempotency`). */
  notify: (e: IdempotencyEvent) => void;
  /** Appends entries to a task's log (false if there is no such task). */
  appendLog: (taskId: string, at: number, entries: readonly NewEvent[]) => Promise<unknown>;
}

/** Who a record's log entries are attributed to. */
export interface RecordActor {
  kind: ActorKind;
  id: string;
  step?: string;
}

/** Either the caller owns the key now, or the stored result is its answer. */
export type Claim = { owner: true; takeover: boolean } | { owner: false; result: string | null };

const DEFAULT_TTL_MS = 86_400_000;
const DEFAULT_LEASE_MS = 30_000;
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 1000;

/** The log entry of an event (type `idempotency:<type>`, data without the time and task id). */
export function idempotencyEntry(e: IdempotencyEvent, actor: RecordActor): NewEvent {
  const { type, at: _at, taskId: _task, ...data } = e;
  return { type: `idempotency:${type}`, actorKind: actor.kind, actorId: actor.id, data: JSON.stringify(data) };
}

export class Idempotency {
  readonly #backend: () => Promise<IdempotencyBackend>;
  readonly #host: IdempotencyHost;
  /** This process's owner tokens start with it (readable in records: host and pid). */
  readonly #ownerPrefix = `${hostname()}:${process.pid}:`;

  /** @internal */
  constructor(backend: () => Promise<IdempotencyBackend>, host: IdempotencyHost) {
    this.#backend = backend;
    this.#host = host;
  }

  /** The backend records live in. */
  backend(): Promise<IdempotencyBackend> {
    return this.#backend();
  }

  /**
   * Runs `fn` at most once per key while its record lives (see the module doc), returning its
   * result or the stored result of an earlier run.
   * @example
   * const receipt = await engine.idempotency.run(`charge:${orderId}`, ({ key }) => psp.charge(order, { idempotencyKey: key }),
   *   { ttl: '7d', fingerprint: { amount: order.amount }, whileRunning: 'error' });
   */
  async run<T>(key: string, fn: (run: IdempotencyRunContext) => T | PromiseLike<T>, options: IdempotencyRunOptions = {}): Promise<Awaited<T>> {
    checkKey(key, 'The idempotency key');
    if (typeof fn !== 'function') throw new InvalidArgumentError('engine.idempotency.run(key, fn): fn must be a function.');
    const o = resolveOptions(options);
    const backend = await this.#backend();
    const owner = this.newOwner();
    const actor: RecordActor = { kind: 'system', id: 'idempotency' };
    const claim = await this.claim(backend, key, owner, o, actor);
    if (!claim.owner) return decodeJson(claim.result) as Awaited<T>;
    const lost = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, lost.signal]) : lost.signal;
    const lease = this.keepAlive(backend, key, owner, o.leaseMs, (why) => lost.abort(leaseLostError(key, why)));
    let value: Awaited<T>;
    try {
      value = await fn({ key, signal, takeover: claim.takeover });
    } catch (e) {
      lease.stop();
      await backend.fail(key, owner, encodeError(coerceError(e)), this.#host.clock.now(), o.ttlMs).catch(() => undefined);
      throw e;
    }
    lease.stop();
    let encoded: string | null;
    try {
      encoded = encodeJson(value, () => `The result of idempotency key "${key}"`);
    } catch (e) {
      await backend.fail(key, owner, encodeError(e), this.#host.clock.now(), o.ttlMs).catch(() => undefined);
      throw e;
    }
    await this.settle(backend, key, owner, encoded, o.ttlMs, lease.heldUntil());
    // What a repeat will get: the JSON copy.
    return decodeJson(encoded) as Awaited<T>;
  }

  /**
   * @internal Records `fn`'s result after it ran. A store that fails is asked again while this
   * owner's lease is surely still held (until `heldUntil`, on this caller's clock, measured from
   * before the last renewal was sent), since no one else can have taken the record over before
   * then. Refused (the record was taken over: another caller may have run `fn` too) → ConflictError;
   * the store away past the lease → StoreUnavailableError. Both say that `fn`'s effect happened.
   */
  async settle(backend: IdempotencyBackend, key: string, owner: string, encoded: string | null, ttlMs: number, heldUntil: number): Promise<void> {
    const clock = this.#host.clock;
    let waitMs = FIRST_POLL_MS;
    for (;;) {
      let done: boolean;
      try {
        done = await backend.complete(key, owner, encoded, clock.now(), ttlMs);
      } catch (e) {
        const retryable = isStepwiseError(e) && e.retryable;
        if (!retryable || clock.now() + waitMs >= heldUntil) {
          throw new StoreUnavailableError(
            `The operation of idempotency key "${key}" ran (its effect happened) but its result could not be recorded: ${(e as Error)?.message ?? String(e)}. The record stays in progress until its lease runs out; a repeat after that runs the operation again.`,
            { cause: e },
          );
        }
        await clock.sleep(waitMs);
        waitMs = Math.min(MAX_POLL_MS, waitMs * 2);
        continue;
      }
      if (!done) throw leaseLostError(key, 'refused');
      return;
    }
  }

  /** Deletes up to `limit` records whose time to live has passed; returns how many. */
  async purge(limit = 1000): Promise<number> {
    return (await this.#backend()).purge(this.#host.clock.now(), limit);
  }

  /** The record of a key, or null (for `show`, tests and support). */
  async get(key: string): Promise<IdempotencyRecord | null> {
    return (await this.#backend()).get(checkKey(key, 'The idempotency key'));
  }

  /** @internal A fresh owner token. */
  newOwner(): string {
    return this.#ownerPrefix + randomUUID();
  }

  /**
   * @internal Acquires `key` for `owner`, or returns the stored result; waits for (or refuses) a
   * live owner and reports conflicts, per the options. Events are recorded as `actor`.
   */
  async claim(backend: IdempotencyBackend, key: string, owner: string, o: ResolvedRunOptions, actor: RecordActor): Promise<Claim> {
    const clock = this.#host.clock;
    let pollMs = FIRST_POLL_MS;
    for (;;) {
      o.signal?.throwIfAborted();
      const now = clock.now();
      const r = await backend.acquire({ key, owner, fingerprint: o.fingerprint, now, leaseMs: o.leaseMs, ttlMs: o.ttlMs, taskId: o.taskId });
      if (r.acquired) {
        if (r.takeover) await this.#report({ type: 'takeover', key, backend: backend.kind, at: now, taskId: o.taskId, previousOwner: r.previous?.owner ?? null }, actor);
        return { owner: true, takeover: r.takeover };
      }
      const rec = r.record;
      if (!fingerprintsMatch(rec.fingerprint, o.fingerprint)) {
        await this.#report({ type: 'conflict', key, backend: backend.kind, at: now, taskId: o.taskId, ranByTask: rec.taskId }, actor);
        throw new ConflictError(
          `Idempotency key "${key}" was first used for a request with other parameters (another fingerprint; its record is ${rec.status}). Use a new key for different work.`,
          { recorded: { status: rec.status, taskId: rec.taskId, createdAt: rec.createdAt } },
        );
      }
      if (rec.status === 'completed') {
        await this.#report({ type: 'hit', key, backend: backend.kind, at: now, taskId: o.taskId, ranByTask: rec.taskId }, actor);
        return { owner: false, result: rec.result };
      }
      const leaseLeft = (rec.leaseExpiresAt ?? now) - now;
      if (o.whileRunning === 'error') throw new IdempotencyInProgressError(key, leaseLeft);
      // Until the owner finishes, or its lease runs out (then the next acquire takes it over).
      await clock.sleep(Math.max(1, Math.min(pollMs, leaseLeft + 1)), o.signal);
      pollMs = Math.min(MAX_POLL_MS, pollMs * 2);
    }
  }

  /**
   * @internal Renews `owner`'s lease every third of it until `stop()`. `onLost('refused')` if a
   * renewal is refused (the record was taken over); `onLost('unreachable')` once renewals have
   * failed for so long that the lease may have run out (less than two renewal periods of it left),
   * as a worker stops its task: another caller may take the record over from then on. `heldUntil()`:
   * until when, on this caller's clock, the lease is surely held (from before the last renewal sent).
   */
  keepAlive(backend: IdempotencyBackend, key: string, owner: string, leaseMs: number, onLost: (why: 'refused' | 'unreachable') => void): KeptLease {
    const stop = new AbortController();
    const clock = this.#host.clock;
    const tickMs = Math.max(1, Math.floor(leaseMs / 3));
    let heldUntil = clock.now() + leaseMs;
    void (async () => {
      for (;;) {
        try {
          await clock.sleep(tickMs, stop.signal);
        } catch {
          return; // stopped
        }
        const sentAt = clock.now();
        // A renewal that fails (the backend is away) is tried again at the next tick, until the
        // lease may have run out.
        const kept = await backend.renew(key, owner, sentAt, leaseMs).catch(() => null);
        if (stop.signal.aborted) return;
        if (kept === false) return onLost('refused');
        if (kept === true) heldUntil = sentAt + leaseMs;
        else if (clock.now() >= heldUntil - tickMs) return onLost('unreachable');
      }
    })();
    return { stop: () => stop.abort(), heldUntil: () => heldUntil };
  }

  async #report(e: IdempotencyEvent, actor: RecordActor): Promise<void> {
    if (actor.step !== undefined) e.step = actor.step;
    this.#host.notify(e);
    if (e.taskId) await this.#host.appendLog(e.taskId, e.at, [idempotencyEntry(e, actor)]);
  }
}

/** A lease being renewed (see `Idempotency.keepAlive`). */
export interface KeptLease {
  stop(): void;
  heldUntil(): number;
}

/** This owner lost its record: taken over, or its store unreachable for about a lease. */
export function leaseLostError(key: string, why: 'refused' | 'unreachable'): ConflictError {
  const cause =
    why === 'refused'
      ? "its record was taken over by another caller after this one's lease ran out"
      : 'its record store could not be reached to renew the lease for about a lease, so another caller may take it over';
  return new ConflictError(
    `This caller lost idempotency key "${key}": ${cause}. Whatever the operation already did happened; another caller may run it (or have run it) too, and a repeat of the key gets that caller's result.`,
    { recorded: { leaseLost: why } },
  );
}

export interface ResolvedRunOptions {
  ttlMs: number;
  leaseMs: number;
  whileRunning: 'wait' | 'error';
  fingerprint: string | null;
  signal: AbortSignal | undefined;
  taskId: string | null;
}

/** @internal The options checked, with their defaults. */
export function resolveOptions(options: IdempotencyRunOptions): ResolvedRunOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('engine.idempotency.run(key, fn, options): options must be an object.');
  const whileRunning = options.whileRunning ?? 'wait';
  if (whileRunning !== 'wait' && whileRunning !== 'error') throw new InvalidArgumentError(`whileRunning must be 'wait' or 'error', got ${JSON.stringify(whileRunning)}.`);
  const ttlMs = options.ttl === undefined ? DEFAULT_TTL_MS : toMs(options.ttl, 'ttl');
  const leaseMs = options.lease === undefined ? DEFAULT_LEASE_MS : toMs(options.lease, 'lease');
  if (ttlMs < 1) throw new InvalidArgumentError('ttl must be at least 1 ms.');
  if (leaseMs < 30) throw new InvalidArgumentError('lease must be at least 30 ms (the owner renews it every third of it).');
  if (options.taskId !== undefined && (typeof options.taskId !== 'string' || !options.taskId)) throw new InvalidArgumentError('taskId must be a task id.');
  return { ttlMs, leaseMs, whileRunning, fingerprint: fingerprintOf(options.fingerprint), signal: options.signal, taskId: options.taskId ?? null };
}
