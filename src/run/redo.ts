/**
 * @module run/redo
 * Internal: not part of the public API (the package exports only its index modules).
 * Idempotency keys of steps run again after their compensation undid them. A retry forgets a step
 * whose compensation completed (see `retry-from.ts`), so the retried run executes it anew; with the
 * key of its first execution, an API that deduplicates on it would hand back the booking or charge
 * that was cancelled or refunded. So each retry that does so counts it, per step id, in the task's
 * `redo` column, and the step's key — and its compensation's, which undoes the new effect — takes
 * the suffix `:redo<n>`. Steps that were not undone keep their keys.
 */
import { COMPENSATE } from './cleanup-scope.ts';

/** The counts after a retry that undid `stepIds`, as stored (JSON), from the stored ones. */
export function countRedo(stored: string | null, stepIds: readonly string[]): string | null {
  if (!stepIds.length) return stored;
  const counts = { ...parseRedo(stored) };
  for (const id of stepIds) counts[id] = (counts[id] ?? 0) + 1;
  return JSON.stringify(counts);
}

/** The last counts parsed: every step call of a retried task's run asks for the same ones. */
let last: { stored: string; counts: Readonly<Record<string, number>> } | null = null;

function parseRedo(stored: string | null): Readonly<Record<string, number>> {
  if (!stored) return {};
  if (last?.stored === stored) return last.counts;
  const parsed: unknown = JSON.parse(stored);
  const counts = parsed && typeof parsed === 'object' ? { ...(parsed as Record<string, number>) } : {};
  last = { stored, counts };
  return counts;
}

/** The suffix of the key of step `stepId` (a compensation's is its step's): `:redo<n>`, or ''. */
export function redoSuffix(stored: string | null, stepId: string): string {
  if (!stored) return '';
  const counts = parseRedo(stored);
  const n = counts[stepId.startsWith(COMPENSATE) ? stepId.slice(COMPENSATE.length) : stepId];
  return n ? `:redo${n}` : '';
}
