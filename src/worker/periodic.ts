/**
 * @module worker/periodic
 * Internal: not part of the public API (the package exports only its index modules).
 * The scheduler of a worker's periodic jobs (closing approvals of ended tasks, purging expired
 * idempotency records, deleting finished tasks past their retention). Each job has a period, an
 * optional first delay and jitter; it never overlaps itself (a run slower than its period delays
 * the next one, it is not doubled); an error is handed to `onError` and the job keeps its
 * schedule. Time is read through an injectable {@link Clock}, so tests drive it with a manual
 * clock. `stop()` cancels the waits and awaits the runs in flight.
 */
import type { Clock } from '../clock.ts';

export interface PeriodicJob {
  /** Names the job in error reports ("during …"). */
  name: string;
  /** Milliseconds from the start of one run to the next (a slower run: from its end). */
  periodMs: number;
  /** Milliseconds before the first run. @defaultValue 0 */
  firstDelayMs?: number;
  /** Up to this many milliseconds are added at random to each wait, so that workers spread out. @defaultValue 0 */
  jitterMs?: number;
  /** One run. `signal` aborts when the scheduler stops. Resolving `'stop'` ends this job's schedule. */
  run: (signal: AbortSignal) => Promise<unknown>;
}

export class PeriodicScheduler {
  readonly #clock: Clock;
  readonly #onError: (error: unknown, job: PeriodicJob) => void;
  readonly #random: () => number;
  readonly #stop = new AbortController();
  readonly #loops: Promise<void>[] = [];

  constructor(options: { clock: Clock; onError: (error: unknown, job: PeriodicJob) => void; random?: () => number }) {
    this.#clock = options.clock;
    this.#onError = options.onError;
    this.#random = options.random ?? Math.random;
  }

  /** Schedules `job` (its first run after `firstDelayMs`); ignored once stopped. */
  add(job: PeriodicJob): void {
    if (this.#stop.signal.aborted || !(job.periodMs > 0)) return;
    this.#loops.push(this.#loop(job));
  }

  async #loop(job: PeriodicJob): Promise<void> {
    const stop = this.#stop.signal;
    let wait = job.firstDelayMs ?? 0;
    while (!stop.aborted) {
      if (!(await this.#sleep(wait + this.#jitter(job)))) return;
      const started = this.#clock.now();
      try {
        if ((await job.run(stop)) === 'stop') return;
      } catch (e) {
        if (!stop.aborted) this.#onError(e, job);
      }
      wait = Math.max(0, job.periodMs - (this.#clock.now() - started));
    }
  }

  #jitter(job: PeriodicJob): number {
    return job.jitterMs ? Math.floor(this.#random() * job.jitterMs) : 0;
  }

  /** Waits `ms`; false if the scheduler stopped meanwhile. */
  async #sleep(ms: number): Promise<boolean> {
    const stop = this.#stop.signal;
    if (stop.aborted) return false;
    if (ms <= 0) return true;
    try {
      await this.#clock.sleep(ms, stop);
      return !stop.aborted;
    } catch {
      return false;
    }
  }

  /** Cancels every wait and resolves once the runs in flight have ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled(this.#loops);
  }
}
