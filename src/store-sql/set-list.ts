/**
 * @module store-sql/set-list
 * Internal: not part of the public API.
 * The SET list of a guarded update and the VALUES list of an insert, written once over
 * {@link SqlParams}, with the SQL types of the columns they bind (PostgreSQL casts each
 * placeholder; SQLite binds the value as it is).
 */
import { APPROVAL_COLUMNS, approvalAssignments, approvalValues } from '../store/approval-rows.ts';
import type { ApprovalPatch, ApprovalRow } from '../store.ts';
import type { SqlParams, SqlType } from './params.ts';

/** The approval table's columns that are not text. */
const APPROVAL_TYPES: Readonly<Record<string, SqlType>> = {
  quorum: 'integer',
  level: 'integer',
  version: 'integer',
  deadline: 'bigint',
  remind_at: 'bigint',
  created_at: 'bigint',
  decided_at: 'bigint',
};
export const approvalType = (col: string): SqlType => APPROVAL_TYPES[col] ?? 'text';

/** `, col = <placeholder>` for each `[column, value]`, to follow a SET list's first assignment. */
export function setList(assignments: ReadonlyArray<readonly [string, unknown]>, p: SqlParams, typeOf: (col: string) => SqlType): string {
  return assignments.map(([col, v]) => `, ${col} = ${p.add(v, typeOf(col))}`).join('');
}

/** `UPDATE <table> SET version = version + 1, …` of an approval patch, by id, returning the row. */
export function approvalUpdateSql(table: string, id: string, patch: ApprovalPatch, p: SqlParams): string {
  const sets = setList(approvalAssignments(patch), p, approvalType);
  return `UPDATE ${table} SET version = version + 1${sets} WHERE id = ${p.add(id, 'text')} RETURNING *`;
}

/** The column list and VALUES placeholders of an approval's insert. */
export function approvalInsertSql(table: string, a: ApprovalRow, p: SqlParams): string {
  const values = approvalValues(a).map((v, i) => p.add(v, approvalType((APPROVAL_COLUMNS[i] as readonly [string, string])[0])));
  return `INSERT INTO ${table} (${APPROVAL_COLUMNS.map(([col]) => col).join(', ')}) VALUES (${values.join(', ')})
  ON CONFLICT (task_id, call_key) DO NOTHING RETURNING *`;
}
