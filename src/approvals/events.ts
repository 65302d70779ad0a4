/**
 * @module approvals/events
 * The approval entries of a task's log as users read them: defined with the other log entry types
 * in task-events/approval.ts.
 */
export { APPROVAL_EVENT_TYPES, isApprovalEntry, toApprovalEvent, type ApprovalEvent, type ApprovalEventType } from '../task-events/approval.ts';
