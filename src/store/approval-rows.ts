/**
 * @module store/approval-rows
 * Internal: not part of the public API (the package exports only its index modules).
 * The approval table's columns and the mapping of its rows (snake_case, integers some drivers
 * hand back as strings) to {@link ApprovalRow}, shared by the SQLite and PostgreSQL stores.
 */
import type { ApprovalPatch, ApprovalRow } from './approvals.ts';

type Raw = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/** Columns in insert order, with the row field each holds. */
export const APPROVAL_COLUMNS = [
  ['id', 'id'],
  ['task_id', 'taskId'],
  ['workflow', 'workflow'],
  ['name', 'name'],
  ['call_key', 'callKey'],
  ['status', 'status'],
  ['approvers', 'approvers'],
  ['quorum', 'quorum'],
  ['payload', 'payload'],
  ['policy', 'policy'],
  ['deadline', 'deadline'],
  ['remind_at', 'remindAt'],
  ['level', 'level'],
  ['decisions', 'decisions'],
  ['outcome', 'outcome'],
  ['version', 'version'],
  ['created_at', 'createdAt'],
  ['decided_at', 'decidedAt'],
] as const satisfies ReadonlyArray<readonly [string, keyof ApprovalRow]>;

/** The columns a patch may set, with their field. */
const PATCH_COLUMNS = [
  ['status', 'status'],
  ['approvers', 'approvers'],
  ['deadline', 'deadline'],
  ['remind_at', 'remindAt'],
  ['level', 'level'],
  ['decisions', 'decisions'],
  ['outcome', 'outcome'],
  ['decided_at', 'decidedAt'],
] as const satisfies ReadonlyArray<readonly [string, keyof ApprovalPatch]>;

export function approvalValues(a: ApprovalRow): unknown[] {
  return APPROVAL_COLUMNS.map(([, field]) => a[field]);
}

/** `[column, value]` for each key the patch sets. */
export function approvalAssignments(patch: ApprovalPatch): Array<[string, unknown]> {
  return PATCH_COLUMNS.filter(([, field]) => field in patch).map(([col, field]) => [col, patch[field] ?? null]);
}

export function toApprovalRow(r: Raw): ApprovalRow {
  return {
    id: String(r.id),
    taskId: String(r.task_id),
    workflow: String(r.workflow),
    name: String(r.name),
    callKey: String(r.call_key),
    status: r.status as ApprovalRow['status'],
    approvers: String(r.approvers),
    quorum: num(r.quorum),
    payload: strOrNull(r.payload),
    policy: String(r.policy),
    deadline: numOrNull(r.deadline),
    remindAt: numOrNull(r.remind_at),
    level: num(r.level),
    decisions: String(r.decisions),
    outcome: strOrNull(r.outcome),
    version: num(r.version),
    createdAt: num(r.created_at),
    decidedAt: numOrNull(r.decided_at),
  };
}
