/**
 * @module approvals/info
 * Internal: not part of the public API (the package exports only its index modules).
 * An approval row as users read it ({@link ApprovalInfo}), the notice observers receive, and the
 * CLI commands that decide it.
 */
import type { ApprovalRow } from '../store.ts';
import type { StoredDecision } from './policy.ts';
import type { ApprovalDecision, ApprovalInfo, ApprovalNotice } from './types.ts';

const date = (ms: number | null): Date | null => (ms === null ? null : new Date(ms));

export function toApprovalInfo(r: ApprovalRow): ApprovalInfo {
  return {
    id: r.id,
    taskId: r.taskId,
    workflow: r.workflow,
    name: r.name,
    status: r.status,
    approvers: JSON.parse(r.approvers) as string[],
    quorum: r.quorum,
    payload: r.payload === null ? undefined : JSON.parse(r.payload),
    deadline: date(r.deadline),
    level: r.level,
    decisions: (JSON.parse(r.decisions) as StoredDecision[]).map((d) => ({
      by: d.by,
      approve: d.approve,
      comment: d.comment,
      data: d.data ?? null,
      at: new Date(d.at),
      idempotencyKey: d.idempotencyKey,
    })),
    createdAt: new Date(r.createdAt),
    decidedAt: date(r.decidedAt),
    outcome: r.outcome === null ? null : (JSON.parse(r.outcome) as ApprovalDecision),
    remindAt: date(r.remindAt),
  };
}

/** The CLI command that decides approval `id` (the approver's name left to fill in). */
export function decideCommand(id: string, approve: boolean): string {
  return `stepwise ${approve ? 'approve' : 'reject'} ${id} --as <name>`;
}

export function notice(kind: ApprovalNotice['kind'], r: ApprovalRow, startedBy: ApprovalNotice['startedBy']): ApprovalNotice {
  return { kind, approval: toApprovalInfo(r), approveCommand: decideCommand(r.id, true), rejectCommand: decideCommand(r.id, false), startedBy };
}
