/**
 * @module idempotency/effect-approval
 * Internal: not part of the public API.
 * Which approval `engine.decideEffect(taskId, step, …)` decides: the latest one named
 * `effect:<step>` of the task (open, or already decided: a repeat is then answered by
 * `engine.decide` as a repeat or a conflict).
 */
import { ConflictError } from '../errors.ts';
import type { ApprovalInfo } from '../approvals/types.ts';
import { effectApprovalName } from './at-most-once.ts';

export function effectApprovalOf(approvals: readonly ApprovalInfo[], taskId: string, step: string): string {
  const name = effectApprovalName(step);
  const named = approvals.filter((a) => a.name === name);
  const open = named.find((a) => a.status === 'pending' || a.status === 'escalated');
  const latest = open ?? named[named.length - 1];
  if (!latest) {
    throw new ConflictError(
      `Task ${taskId} has no decision to make on step "${step}": it asks for one (approval "${name}") only when its at-most-once effect cannot be verified. See engine.explain(${JSON.stringify(taskId)}).`,
      { recorded: null },
    );
  }
  return latest.id;
}
