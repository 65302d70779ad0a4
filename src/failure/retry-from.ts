/**
 * @module failure/retry-from
 * `engine.retry(id, { fromStep })`: a failed task runs again from a named step. That step and
 * every call at a later journal position are forgotten (they run again, with fresh attempt
 * budgets); the steps before it keep their recorded results and are not run again.
 */
import { InvalidArgumentError } from '../errors.ts';
import type { StepRow } from '../store.ts';

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
    throw new InvalidArgumentError(
      `retry: task ${taskId} has no step "${fromStep}" in its journal${names.length ? ` (its steps: ${names.join(', ')})` : ' (it has no steps yet)'}.`,
    );
  }
  const after = journal.filter((s) => s.seq >= from.seq).sort((a, b) => a.seq - b.seq);
  return { deleteSteps: after.map((s) => s.seq), forgotten: after.map((s) => s.name) };
}
