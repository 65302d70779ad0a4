/**
 * @module worker/periodic
 * Internal: not part of the public API (the package exports only its index modules).
 * The scheduler of every background loop of a worker (the dwell scanner, closing approvals of
 * ended tasks, purging expired idempotency records, deleting finished tasks past their retention).
 * Each job has a period, an optional first delay and jitter; it never overlaps itself (a run
 * slower than its period delays the next one, it is not doubled); an error is handed to `onError`
 * and the job keeps its schedule. A job may ask to run earlier than its period: `wakeAt(time)` (a
 * deadline it knows of, on its `wakeClock`) or `runSoon()`; the earliest request wins, and a
 * request made during a run applies to the wait after it. Time is read through injectable
 * {@link Clock}s, so tests drive them with a manual clock. `stop()` cancels the waits and awaits
 * the runs in flight.
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
  /** The clock the times given to `wakeAt` are on. @defaultValue the scheduler's clock */
  wakeClock?: Clock;
  /** One run. `signal` aborts when the scheduler stops. Resolving `'stop'` ends this job's schedule. */
  run: (signal: AbortSignal) => Promise<unknown>;
}

/** A scheduled job, to ask for an earlier run. */
export interface ScheduledJob {
  /** Runs the job at `time` (on its `wakeClock`) if that comes before its next run; a past time: at once. */
  wakeAt(time: number): void;
  /** Runs the job as soon as it is not running. */
  runSoon(): void;
}

/** The wait of one job before its next run, which `wakeAt` may shorten. */
class Wait {
  /** The earliest time asked for by `wakeAt` (on the wake clock), until the next run starts. */
  at: number | null = null;
  #poke: (() => void) | null = null;

  wakeAt(time: number): void {
    if (this.at !== null && this.at <= time) return;
    this.at = time;
    this.#poke?.();
  }

  /**
   * Waits until `until` on `clock`, or until the time asked for on `wakeClock`, whichever comes
   * first (a later `wakeAt` is taken into account); false if `stop` aborted meanwhile.
   */
  async until(clock: Clock, until: number, wakeClock: Clock, stop: AbortSignal): Promise<boolean> {
    while (!stop.aborted) {
      if (this.at !== null && this.at <= wakeClock.now()) return true;
      const left = until - clock.now();
      if (left <= 0) return true;
      const turn = new AbortController();
      const end = (): void => turn.abort();
      stop.addEventListener('abort', end, { once: true });
      this.#poke = end;
      const waits = [clock.sleep(left, turn.signal)];
      if (this.at !== null) waits.push(wakeClock.sleep(this.at - wakeClock.now(), turn.signal));
      await Promise.race(waits).catch(() => undefined);
      this.#poke = null;
      stop.removeEventListener('abort', end);
      turn.abort(); // clears the other sleep (its rejection is handled by the race)
    }
    return false;
  }
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
  add(job: PeriodicJob): ScheduledJob {
    const wait = new Wait();
    const wakeClock = job.wakeClock ?? this.#clock;
    const scheduled: ScheduledJob = { wakeAt: (time) => wait.wakeAt(time), runSoon: () => wait.wakeAt(-Infinity) };
    if (this.#stop.signal.aborted || !(job.periodMs > 0)) return scheduled;
    this.#loops.push(this.#loop(job, wait, wakeClock));
    return scheduled;
  }

  async #loop(job: PeriodicJob, wait: Wait, wakeClock: Clock): Promise<void> {
    const stop = this.#stop.signal;
    let ms = job.firstDelayMs ?? 0;
    while (!stop.aborted) {
      if (!(await wait.until(this.#clock, this.#clock.now() + ms + this.#jitter(job), wakeClock, stop))) return;
      wait.at = null;
      const started = this.#clock.now();
      try {
        if ((await job.run(stop)) === 'stop') return;
      } catch (e) {
        if (!stop.aborted) this.#onError(e, job);
      }
      ms = Math.max(0, job.periodMs - (this.#clock.now() - started));
    }
  }

  #jitter(job: PeriodicJob): number {
    return job.jitterMs ? Math.floor(this.#random() * job.jitterMs) : 0;
  }

  /** Cancels every wait and resolves once the runs in flight have ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled(this.#loops);
  }
}
