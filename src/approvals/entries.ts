/**
 * @module approvals/entries
 * Internal: not part of the public API (the package exports only its index modules).
 * The approval entries of a task's event log (their stored form; `task-events.ts` reads them back
 * as {@link ApprovalEvent}): requested, a decision, reminded, escalated, and decided (the outcome,
 * whose actor is the approver, or the timeout policy as a system actor).
 */
import type { ActorKind, ApprovalRow, NewEvent } from '../store.ts';
import type { ApprovalDecision } from './types.ts';
import type { StoredDecision } from './policy.ts';
import { APPROVAL_EVENT_TYPES, type ApprovalEventType } from './events.ts';

export { APPROVAL_EVENT_TYPES, type ApprovalEventType } from './events.ts';

/** The system actor of what a timeout policy does. */
export const POLICY_ACTOR = (policy: string): { kind: ActorKind; id: string } => ({ kind: 'system', id: `approval-policy:${policy}` });
export const REMINDER_ACTOR = { kind: 'system', id: 'approval-reminder' } as const satisfies { kind: ActorKind; id: string };

const entry = (type: ApprovalEventType, actor: { kind: ActorKind; id: string }, data: Record<string, unknown>): NewEvent => ({
  type,
  actorKind: actor.kind,
  actorId: actor.id,
  data: JSON.stringify(data),
});

const base = (a: ApprovalRow): Record<string, unknown> => ({ approvalId: a.id, name: a.name });

export function requestedEntry(a: ApprovalRow, actor: { kind: ActorKind; id: string }): NewEvent {
  return entry(APPROVAL_EVENT_TYPES.requested, actor, {
    ...base(a),
    approvers: JSON.parse(a.approvers),
    quorum: a.quorum,
    payload: a.payload === null ? null : JSON.parse(a.payload),
    deadline: a.deadline,
    level: a.level,
  });
}

export function decisionEntry(a: ApprovalRow, d: StoredDecision): NewEvent {
  return entry(
    APPROVAL_EVENT_TYPES.decision,
    { kind: 'user', id: d.by },
    {
      ...base(a),
      approve: d.approve,
      comment: d.comment,
      data: d.data ?? null,
      idempotencyKey: d.idempotencyKey,
    },
  );
}

export function remindedEntry(a: ApprovalRow, next: number): NewEvent {
  return entry(APPROVAL_EVENT_TYPES.reminded, REMINDER_ACTOR, { ...base(a), level: a.level, approvers: JSON.parse(a.approvers), deadline: a.deadline, nextReminder: next });
}

export function escalatedEntry(a: ApprovalRow, change: { level: number; approvers: string[]; added: string[]; deadline: number | null }): NewEvent {
  return entry(APPROVAL_EVENT_TYPES.escalated, POLICY_ACTOR('escalate'), { ...base(a), ...change, previousDeadline: a.deadline });
}

export function decidedEntry(a: ApprovalRow, outcome: ApprovalDecision, status: string, actor: { kind: ActorKind; id: string }): NewEvent {
  return entry(APPROVAL_EVENT_TYPES.decided, actor, { ...base(a), status, outcome });
}
