/**
 * @module failure/attempts
 * Every failed attempt of a task's steps, read from its event log: each failed attempt writes a
 * `step:retrying` entry (its error with the engine's class, when the next attempt is due), and the
 * attempt that failed for good is the `step:failed` (or skipped `step:completed`) entry.
 */
import type { SerializedError } from '../serialize.ts';
import type { TaskEvent } from '../task-events.ts';

export interface FailedAttempt {
  /** The step id and its journal position. */
  step: string;
  seq: number;
  /** 1 for the first attempt. */
  attempt: number;
  /** When it was recorded. */
  at: number;
  error: SerializedError;
  /** What followed: another attempt (due at `nextAt`), the step failing, or the step skipped. */
  outcome: 'retried' | 'failed' | 'skipped';
  nextAt: number | null;
}

/** The failed attempts in a task's history (oldest first), one per attempt. */
export function failedAttempts(history: readonly TaskEvent[]): FailedAttempt[] {
  const out: FailedAttempt[] = [];
  const seen = new Set<string>();
  for (const e of history) {
    if (e.type !== 'step:retrying' && e.type !== 'step:failed' && e.type !== 'step:completed') continue;
    const s = e.step;
    if (!s.error || s.kind !== 'step') continue;
    // A retry row written again (a pause, a park) describes the same attempt.
    const key = `${s.seq}:${s.attempts}:${e.type === 'step:retrying' ? 'r' : 'f'}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({
      step: s.name,
      seq: s.seq,
      attempt: s.attempts,
      at: e.at,
      error: s.error,
      outcome: e.type === 'step:retrying' ? 'retried' : e.type === 'step:failed' ? 'failed' : 'skipped',
      nextAt: e.type === 'step:retrying' ? s.wakeAt : null,
    });
  }
  return out;
}

/** `transient http 429, Retry-After 1000ms` — the class of an attempt's error in a few words. */
export function describeClass(error: SerializedError): string {
  const c = error.class;
  if (!c) return error.retryable === false ? 'permanent' : '';
  return `${c.kind} ${c.reason}${c.retryAfterMs !== undefined ? `, Retry-After ${c.retryAfterMs}ms` : ''}${c.repairsUsed ? `, repair ${c.repairsUsed}` : ''}`;
}
