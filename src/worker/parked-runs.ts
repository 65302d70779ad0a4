/**
 * @module worker/parked-runs
 * Internal: not part of the public API.
 * The parked runs a worker keeps in memory (see `run/resume.ts`): at most `max`, each for
 * `keepMs` on the engine's clock, the oldest dropped first. A run taken out is resumed by the
 * caller if its task's claim allows it, else dropped; a dropped run tells its steps the run has
 * ended, as its end would have.
 */
import type { Clock } from '../clock.ts';
import type { TaskRun } from '../run/task-run.ts';

export class ParkedRuns {
  readonly #runs = new Map<string, { run: TaskRun; until: number }>();
  /** The epoch each kept run parked at: a claim leaves their journals unread (`ClaimRequest.journals`). */
  readonly epochs = new Map<string, number>();
  readonly #max: number;
  readonly #keepMs: number;
  readonly #clock: Clock;

  constructor(max: number, keepMs: number, clock: Clock) {
    this.#max = max;
    this.#keepMs = keepMs;
    this.#clock = clock;
  }

  /** Whether runs are kept at all. */
  get on(): boolean {
    return this.#max > 0;
  }

  get size(): number {
    return this.#runs.size;
  }

  /** Keeps a run that has just parked (see `TaskRun.kept`). */
  keep(run: TaskRun): void {
    const now = this.#clock.now();
    this.#runs.get(run.taskId)?.run.discard();
    this.#runs.delete(run.taskId);
    this.#runs.set(run.taskId, { run, until: now + this.#keepMs });
    this.epochs.set(run.taskId, run.epoch);
    while (this.#runs.size > this.#max) this.#drop(this.#runs.keys().next().value as string);
    this.sweep();
  }

  /** The kept run of `taskId`, taken out (the caller resumes it or discards it). */
  take(taskId: string): TaskRun | undefined {
    this.sweep();
    const kept = this.#runs.get(taskId);
    this.#runs.delete(taskId);
    this.epochs.delete(taskId);
    return kept?.run;
  }

  /** Drops the runs kept for longer than `keepMs`. */
  sweep(): void {
    const now = this.#clock.now();
    for (const [taskId, kept] of this.#runs) {
      if (kept.until > now) break;
      this.#drop(taskId);
    }
  }

  /** Drops every kept run (the worker stops). */
  clear(): void {
    for (const taskId of [...this.#runs.keys()]) this.#drop(taskId);
  }

  /** Forgets every kept run without telling its steps anything (the process is taken to have died). */
  forget(): void {
    this.#runs.clear();
    this.epochs.clear();
  }

  #drop(taskId: string): void {
    const kept = this.#runs.get(taskId);
    this.#runs.delete(taskId);
    this.epochs.delete(taskId);
    kept?.run.discard();
  }
}
