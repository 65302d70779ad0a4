/**
 * @module task-events/approval
 * The approval entries of a task's event log as users read them (`engine.get(id).history`,
 * `engine.events()`, observers' `onEvent`): one shape for the five kinds, with the approval's id
 * and what changed (`detail`: approvers, deadline and payload when requested; the decision's
 * `approve`, `comment`, `data` and key; the new level and approvers when escalated; the outcome
 * when decided). The actor is the approver, the worker that asked, or the timeout policy.
 */
import type { Actor } from './actor.ts';

/** The stored types of the approval entries (written by approvals/entries.ts). */
export const APPROVAL_EVENT_TYPES = Object.freeze({
  requested: 'approval:requested',
  decision: 'approval:decision',
  reminded: 'approval:reminded',
  escalated: 'approval:escalated',
  decided: 'approval:decided',
} as const);
export type ApprovalEventType = (typeof APPROVAL_EVENT_TYPES)[keyof typeof APPROVAL_EVENT_TYPES];

export interface ApprovalEvent {
  taskId: string;
  seq: number;
  at: number;
  actor: Actor;
  type: ApprovalEventType;
  approvalId: string;
  /** The approval's name (`ctx.approval(name)`). */
  name: string;
  detail: Record<string, unknown>;
}

const TYPES: readonly string[] = Object.values(APPROVAL_EVENT_TYPES);

export function isApprovalEntry(type: string): type is ApprovalEventType {
  return TYPES.includes(type);
}

export function toApprovalEvent(base: { taskId: string; seq: number; at: number; actor: Actor }, type: ApprovalEventType, data: Record<string, unknown>): ApprovalEvent {
  const { approvalId, name, ...detail } = data;
  return { ...base, type, approvalId: String(approvalId), name: String(name), detail };
}
