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
import { systemClock } from './clock.ts';
import { PeriodicScheduler, type PeriodicJob } from './worker/periodic.ts';

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

/** A periodic sweep: its {@link PeriodicJob} for a worker's scheduler, or run on its own (`start`/`stop`). */
export class Sweeper {
  readonly #purge: (limit: number) => Promise<number>;
  readonly #intervalMs: number;
  readonly #onError: (error: unknown) => void;
  readonly #stopsFor: (error: unknown) => boolean;
  #own: PeriodicScheduler | null = null;
  #stopped = false;

  constructor(options: SweeperOptions) {
    this.#purge = options.purge;
    this.#intervalMs = options.intervalMs;
    this.#onError = options.onError;
    this.#stopsFor = options.stopsFor ?? ((e) => isStepwiseError(e, ERROR_CODES.INVALID_ARGUMENT));
  }

  /**
   * The sweep as a periodic job named `name`. The first sweep comes within a minute, so that a
   * worker restarted often still purges; an error that says no sweep will succeed ends the job.
   */
  job(name: string): PeriodicJob {
    return {
      name,
      periodMs: this.#intervalMs,
      firstDelayMs: Math.min(this.#intervalMs, FIRST_SWEEP_MS),
      run: async (signal) => {
        try {
          await this.sweep(signal);
        } catch (e) {
          if (this.#stopsFor(e)) return 'stop';
          this.#onError(e);
        }
      },
    };
  }

  /** Sweeps every `intervalMs` on a scheduler of its own (real time). */
  start(): void {
    if (this.#intervalMs <= 0 || this.#own) return;
    this.#own = new PeriodicScheduler({ clock: systemClock, onError: (e) => this.#onError(e) });
    this.#own.add(this.job('sweep'));
  }

  /** One sweep now; resolves with how many rows it deleted. */
  async sweep(signal?: AbortSignal): Promise<number> {
    let total = 0;
    for (let i = 0; i < MAX_BATCHES && !this.#stopped && !signal?.aborted; i++) {
      const n = await this.#purge(SWEEP_BATCH);
      total += n;
      if (n < SWEEP_BATCH) break;
    }
    return total;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#own?.stop();
  }
}
