/**
 * @module idempotency/purger
 * Internal: not part of the public API (the package exports only its index modules).
 * Expired idempotency records are deleted by every worker, on a periodic sweep
 * (`WorkerOptions.idempotencyPurgeMs`, every ten minutes by default): a record whose time to live
 * has passed is already treated as absent by every acquirer, so deleting it changes no answer; it
 * only keeps the table from growing without bound. A sweep deletes in batches, oldest first, until
 * a batch comes back short (at most {@link MAX_BATCHES} per sweep; the next sweep takes the rest).
 * Two workers sweeping at once delete disjoint rows (PostgreSQL skips rows another one holds;
 * SQLite has one writer at a time). A backend with nothing to purge (Redis expires its keys
 * itself) answers 0; an engine with no record store at all stops sweeping after its first try.
 */
import { ERROR_CODES, isStepwiseError } from '../errors.ts';

/** How often a worker deletes expired records, unless its options say otherwise. */
export const DEFAULT_PURGE_MS = 10 * 60_000;
/** The longest interval a timer takes (Node's setInterval fires at once above it). */
export const MAX_PURGE_MS = 2 ** 31 - 1;
/** The first sweep after start comes at most this late. */
const FIRST_SWEEP_MS = 60_000;
/** Records deleted per statement. */
export const PURGE_BATCH = 1000;
/** Statements per sweep. */
const MAX_BATCHES = 20;

export class IdempotencyPurger {
  readonly #purge: (limit: number) => Promise<number>;
  readonly #intervalMs: number;
  readonly #onError: (error: unknown) => void;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = false;
  #busy = false;

  /** `purge(limit)` deletes up to `limit` expired records and returns how many it deleted. */
  constructor(purge: (limit: number) => Promise<number>, intervalMs: number, onError: (error: unknown) => void) {
    this.#purge = purge;
    this.#intervalMs = intervalMs;
    this.#onError = onError;
  }

  start(): void {
    if (this.#intervalMs <= 0 || this.#timer) return;
    // The first sweep comes within a minute, so that a worker restarted often still purges.
    this.#timer = setTimeout(() => {
      this.#run();
      if (this.#timer) this.#timer = setInterval(() => this.#run(), this.#intervalMs);
      this.#timer?.unref?.();
    }, Math.min(this.#intervalMs, FIRST_SWEEP_MS));
    this.#timer.unref?.();
  }

  /** One sweep now; resolves with how many records it deleted. */
  async sweep(): Promise<number> {
    let total = 0;
    for (let i = 0; i < MAX_BATCHES && !this.#stopped; i++) {
      const n = await this.#purge(PURGE_BATCH);
      total += n;
      if (n < PURGE_BATCH) break;
    }
    return total;
  }

  #run(): void {
    if (this.#busy) return; // a sweep slower than the interval: the next tick after it ends takes over
    this.#busy = true;
    this.#running = this.sweep().catch((e: unknown) => {
      // No record store to purge (a custom store without idempotency records): nothing ever will be.
      if (isStepwiseError(e, ERROR_CODES.INVALID_ARGUMENT)) return void this.#clear();
      this.#onError(e);
    }).finally(() => {
      this.#busy = false;
    });
  }

  #clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clear();
    await this.#running;
  }
}
