/**
 * @module task-events/approval
 * The approval entries of a task's event log as users read them (`engine.get(id).history`,
 * `engine.events()`, observers' `onEvent`): one shape for the five kinds, with the approval's id
 * and what changed (`detail`: approvers, deadline and payload when requested; the decision's
 * `approve`, `comment`, `data` and key; the new level and approvers when escalated; the outcome
 * when decided). The actor is the approver, the worker that asked, or the timeout policy.
 */
import type { Actor } from './actor.ts';

const TYPES = ['approval:requested', 'approval:decision', 'approval:reminded', 'approval:escalated', 'approval:decided'] as const;
/** The type of an approval entry (the stored types of approvals/entries.ts). */
export type ApprovalEntryType = (typeof TYPES)[number];

export interface ApprovalEvent {
  taskId: string;
  seq: number;
  at: number;
  actor: Actor;
  type: ApprovalEntryType;
  approvalId: string;
  /** The approval's name (`ctx.approval(name)`). */
  name: string;
  detail: Record<string, unknown>;
}

export function isApprovalEntry(type: string): type is ApprovalEntryType {
  return (TYPES as readonly string[]).includes(type);
}

export function toApprovalEvent(base: { taskId: string; seq: number; at: number; actor: Actor }, type: ApprovalEntryType, data: Record<string, unknown>): ApprovalEvent {
  const { approvalId, name, ...detail } = data;
  return { ...base, type, approvalId: String(approvalId), name: String(name), detail };
}
