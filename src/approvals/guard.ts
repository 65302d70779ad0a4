/**
 * @module approvals/guard
 * Internal: not part of the public API (the package exports only its index modules).
 * The `requires` guard of `ctx.step(name, fn, { requires: 'review' })`: before the step's first
 * attempt the engine reads the task's approval records (not the code's variables) and refuses the
 * step unless the latest approval of that name is approved.
 */
import { ApprovalRequiredError, InvalidArgumentError } from '../errors.ts';
import type { Run } from '../run/run.ts';

/** Why the step may not run, or null if it may. A store that fails throws (the attempt is retried later). */
export async function requiredApproval(run: Run, stepId: string, requires: unknown): Promise<ApprovalRequiredError | null> {
  if (typeof requires !== 'string' || !requires) throw run.fail(new InvalidArgumentError(`ctx.step("${stepId}"): requires must be the name of an approval.`));
  const rows = await run.deps.store.listApprovals({ taskId: run.taskId, limit: 1000 });
  const named = rows.filter((r) => r.name === requires);
  const latest = named[named.length - 1];
  if (!latest) return new ApprovalRequiredError(stepId, requires, 'this task never asked for');
  if (latest.status === 'approved') return null;
  const why = latest.status === 'pending' || latest.status === 'escalated' ? 'is not decided yet' : `was ${latest.status}`;
  return new ApprovalRequiredError(stepId, requires, `${why} (approval ${latest.id})`);
}
