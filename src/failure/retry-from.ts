/**
 * @module failure/retry-from
 * What `engine.retry(id)` forgets of a failed task's journal, so that the retried run makes the
 * same calls as the first one up to the point where it must do something again.
 *
 * - `engine.retry(id, { fromStep })`: that step and every call at a later journal position are
 *   forgotten (they run again, with fresh attempt budgets); the steps before it keep their
 *   recorded results and are not run again.
 * - A step whose compensation completed in the cleanup being retried was undone: it is forgotten
 *   too, with what the code did after receiving it ({@link consequencesOf}), whatever else the
 *   retry forgets. A step whose compensation failed or did not run was not undone: it is kept
 *   unless one of these rules forgets it (a later call of an undone step is run again, because the
 *   code receives that step's new result before making it).
 *
 * Why this is consistent with replay: a kept call was made before the code received any forgotten
 * result, so the retried code makes it again at the same position, having received the same
 * (kept) results; every call made after the code received a forgotten result is forgotten too.
 */
import { InvalidArgumentError } from '../errors.ts';
import type { StepRow } from '../store.ts';
import { COMPENSATE } from '../run/cleanup-scope.ts';

export interface RetryFrom {
  /** Journal positions to delete. */
  deleteSteps: number[];
  /** Their step ids, for the log. */
  forgotten: string[];
}

/** What a retry from step `fromStep` (a step id: `name` or `name#2`) forgets; refuses an unknown step. */
export function planRetryFrom(journal: readonly StepRow[], fromStep: string, taskId: string): RetryFrom {
  if (typeof fromStep !== 'string' || !fromStep) throw new InvalidArgumentError('retry: fromStep must be the name of a step of the task.');
  const from = journal.find((s) => s.name === fromStep);
  if (!from) {
    const names = [...new Set(journal.map((s) => s.name))];
    throw new InvalidArgumentError(`retry: task ${taskId} has no step "${fromStep}" in its journal${names.length ? ` (its steps: ${names.join(', ')})` : ' (it has no steps yet)'}.`);
  }
  const after = journal.filter((s) => s.seq >= from.seq).sort((a, b) => a.seq - b.seq);
  return { deleteSteps: after.map((s) => s.seq), forgotten: after.map((s) => s.name) };
}

/**
 * The code's completed steps whose compensation completed in `cleanup` (the cleanup's rows: the
 * compensation of step `book#2` is `compensate:book#2`), in journal order.
 */
export function undoneSteps(journal: readonly StepRow[], cleanup: readonly StepRow[]): StepRow[] {
  const undone = new Set(cleanup.filter((s) => s.status === 'completed' && s.name.startsWith(COMPENSATE)).map((s) => s.name.slice(COMPENSATE.length)));
  if (!undone.size) return [];
  return journal.filter((s) => s.kind === 'step' && s.status === 'completed' && undone.has(s.name)).sort((a, b) => a.seq - b.seq);
}

/**
 * The calls the code made because it received `root` (after it, at a later position), which a
 * retry that runs `root` again forgets with it. A call made before the code received `root` (a
 * `Promise.all` branch beside it) is not a consequence: it is kept, so that a completed side effect
 * is not repeated (see {@link ranAlongside}).
 */
export function consequencesOf(journal: readonly StepRow[], root: StepRow): StepRow[] {
  return journal.filter((s) => s.seq > root.seq && (s.done === null || (root.done !== null && s.done > root.done)) && !ranAlongside(s, root));
}

/**
 * A call the code made before it received `root` (a branch that ran beside it), as opposed to one
 * it made because of it. Rows written before `calledAfter` was recorded count as consequences.
 */
export function ranAlongside(s: StepRow, root: StepRow): boolean {
  // A sibling that failed is not kept: kept, its recorded failure would fail the retry at once.
  return s.status !== 'failed' && s.calledAfter !== null && root.done !== null && s.calledAfter < root.done;
}

/** Whether the code made call `s` after it had received `root` (so `s` may depend on it). */
export function calledAfterReceiving(s: StepRow, root: StepRow): boolean {
  if (s.calledAfter !== null && root.done !== null) return s.calledAfter >= root.done;
  return s.seq > root.seq;
}

/** The undone steps and their consequences: what a retry forgets whatever else it does, by position. */
export function forgetUndone(journal: readonly StepRow[], undone: readonly StepRow[]): Map<number, StepRow> {
  const rows = new Map<number, StepRow>();
  for (const u of undone) {
    rows.set(u.seq, u);
    for (const s of consequencesOf(journal, u)) rows.set(s.seq, s);
  }
  return rows;
}
