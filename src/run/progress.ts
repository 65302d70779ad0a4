/**
 * @module run/progress
 * Internal: not part of the public API (the package exports only its index modules).
 * Progress a long step reports (`step.progress({ done, total, note })`, or `ctx.progress` between
 * steps): stored on the task row for `show`, `ls` and pollers, without a journal row. Reports are
 * coalesced: one write at a time per run, at most one a second; the latest report always reaches
 * the store (a report arriving during the quiet second is written when it ends).
 */
import { InvalidArgumentError, coerceError } from '../errors.ts';
import { checkText } from '../text-rules.ts';
import type { Progress } from '../api/step.ts';
import type { RunCore } from './core.ts';

/** Between two progress writes of one run. */
const PROGRESS_EVERY_MS = 1000;

export class ProgressReporter {
  readonly #run: RunCore;
  #pending: string | null = null;
  #lastWrite = 0;
  #timer: NodeJS.Timeout | null = null;
  #writing = false;

  constructor(run: RunCore) {
    this.#run = run;
  }

  /** Checks and records a report of `step` (null: the workflow code between steps). */
  report(step: string | null, p: Progress): void {
    if (typeof p !== 'object' || p === null) throw new InvalidArgumentError('progress() takes { done, total, note }.');
    for (const k of ['done', 'total'] as const) {
      const v = p[k];
      if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) throw new InvalidArgumentError(`progress(): ${k} must be a number ≥ 0, got ${String(v)}.`);
    }
    if (p.note !== undefined && (typeof p.note !== 'string' || p.note.length > 500)) throw new InvalidArgumentError('progress(): note must be a string of at most 500 characters.');
    if (p.note !== undefined) checkText(p.note, 'The progress note');
    const at = this.#run.deps.clock.now();
    this.#pending = JSON.stringify({
      ...(p.done !== undefined ? { done: p.done } : {}),
      ...(p.total !== undefined ? { total: p.total } : {}),
      ...(p.note !== undefined ? { note: p.note } : {}),
      step,
      at,
    });
    this.#schedule();
  }

  #schedule(): void {
    if (this.#writing || this.#timer || this.#pending === null || this.#run.ended) return;
    const wait = this.#lastWrite + PROGRESS_EVERY_MS - Date.now();
    if (wait > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.#schedule();
      }, wait);
      this.#timer.unref?.();
      return;
    }
    const progress = this.#pending;
    this.#pending = null;
    this.#writing = true;
    this.#lastWrite = Date.now();
    const run = this.#run;
    run.deps.store.setProgress(run.taskId, run.epoch, progress).then(
      () => this.#written(),
      (e: unknown) => {
        run.deps.emit('worker:error', { error: coerceError(e), during: `recording progress of task ${run.taskId}` });
        this.#written();
      },
    );
  }

  #written(): void {
    this.#writing = false;
    this.#schedule();
  }

  /** The run ended: a report still waiting for its quiet second is dropped with the timer. */
  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
