/**
 * @module sweeper
 * Internal: not part of the public API (the package exports only its index modules).
 * A periodic sweep that deletes what has outlived its time, run by every worker: expired
 * idempotency records (`WorkerOptions.idempotencyPurgeMs`) and finished tasks past their retention
 * (`WorkerOptions.retentionSweepMs`), every ten minutes by default. A sweep deletes in batches,
 * oldest first, until a batch comes back short (at most {@link MAX_BATCHES} per sweep; the next
 * sweep takes the rest). Two workers sweeping at once delete disjoint rows (PostgreSQL skips rows
 * another one holds; SQLite has one writer at a time).
 */
import { ERROR_CODES, isStepwiseError } from './errors.ts';

/** How often a worker sweeps, unless its options say otherwise. */
export const DEFAULT_SWEEP_MS = 10 * 60_000;
/** The longest interval a timer takes (Node's setInterval fires at once above it). */
export const MAX_SWEEP_MS = 2 ** 31 - 1;
/** The first sweep after start comes at most this late. */
const FIRST_SWEEP_MS = 60_000;
/** Rows deleted per call of the sweep's function. */
export const SWEEP_BATCH = 1000;
/** Calls per sweep. */
const MAX_BATCHES = 20;

export interface SweeperOptions {
  /** `purge(limit)` deletes up to `limit` rows and returns how many it deleted. */
  purge: (limit: number) => Promise<number>;
  /** Milliseconds between sweeps; 0: never. */
  intervalMs: number;
  onError: (error: unknown) => void;
  /**
   * An error that says no sweep will ever succeed (an engine with no idempotency record store):
   * sweeping stops after it, without reporting it. @defaultValue INVALID_ARGUMENT
   */
  stopsFor?: (error: unknown) => boolean;
}

export class Sweeper {
  readonly #purge: (limit: number) => Promise<number>;
  readonly #intervalMs: number;
  readonly #onError: (error: unknown) => void;
  readonly #stopsFor: (error: unknown) => boolean;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = false;
  #busy = false;

  constructor(options: SweeperOptions) {
    this.#purge = options.purge;
    this.#intervalMs = options.intervalMs;
    this.#onError = options.onError;
    this.#stopsFor = options.stopsFor ?? ((e) => isStepwiseError(e, ERROR_CODES.INVALID_ARGUMENT));
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

  /** One sweep now; resolves with how many rows it deleted. */
  async sweep(): Promise<number> {
    let total = 0;
    for (let i = 0; i < MAX_BATCHES && !this.#stopped; i++) {
      const n = await this.#purge(SWEEP_BATCH);
      total += n;
      if (n < SWEEP_BATCH) break;
    }
    return total;
  }

  #run(): void {
    if (this.#busy) return; // a sweep slower than the interval: the next tick after it ends takes over
    this.#busy = true;
    this.#running = this.sweep().catch((e: unknown) => {
      if (this.#stopsFor(e)) return void this.#clear();
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
