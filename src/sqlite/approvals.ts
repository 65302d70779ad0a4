/**
 * @module sqlite/approvals
 * Internal: not part of the public API.
 * The approval table on SQLite: creation fenced by the run's lease, guarded updates with their log
 * entries and wake-up signal in one `BEGIN IMMEDIATE` transaction, and the reviewer's queries.
 * The store facade hands it its statement cache, transaction and log appender.
 */
import type { TaskStatus } from '../lifecycle.ts';
import { toApprovalRow } from '../store/approval-rows.ts';
import { approvalGuardPasses } from '../store-sql/guards.ts';
import { approvalTerms, whereOf } from '../store-sql/filters.ts';
import { approvalInsertSql, approvalUpdateSql } from '../store-sql/set-list.ts';
import type { ApprovalChange, ApprovalInsert, ApprovalQuery, ApprovalRow, ApprovalUpdate, LogAppend, NewEvent } from '../store.ts';
import type Database from 'better-sqlite3';
import { LEASED_SQL as LEASED, SqliteParams } from './sql.ts';

type Raw = Record<string, unknown>;

/** What the store facade lends this module. */
export interface SqliteHandle {
  stmt(sql: string): Database.Statement;
  tx<T>(fn: () => T): T;
  append(no: number, at: number, entries: readonly NewEvent[]): number[];
}

export function insertApproval(h: SqliteHandle, w: ApprovalInsert): { approval: ApprovalRow; created: boolean } | null {
  return h.tx(() => {
    const task = h.stmt(`SELECT no FROM stepwise_tasks WHERE id = ? AND epoch = ? AND status IN (${LEASED})`).get(w.approval.taskId, w.epoch) as { no: number } | undefined;
    if (!task) return null;
    const p = new SqliteParams();
    const row = h.stmt(approvalInsertSql('stepwise_approvals', w.approval, p)).get(...p.values) as Raw | undefined;
    if (row) {
      h.append(task.no, w.at, w.log);
      return { approval: toApprovalRow(row), created: true };
    }
    const existing = h.stmt('SELECT * FROM stepwise_approvals WHERE task_id = ? AND call_key = ?').get(w.approval.taskId, w.approval.callKey) as Raw;
    return { approval: toApprovalRow(existing), created: false };
  });
}

export function getApproval(h: SqliteHandle, id: string): ApprovalRow | null {
  const row = h.stmt('SELECT * FROM stepwise_approvals WHERE id = ?').get(id) as Raw | undefined;
  return row ? toApprovalRow(row) : null;
}

export function listApprovals(h: SqliteHandle, q: ApprovalQuery): ApprovalRow[] {
  const p = new SqliteParams();
  const sql = `SELECT * FROM stepwise_approvals ${whereOf(approvalTerms(q, p, 'stepwise_tasks'))} ORDER BY created_at, id LIMIT ${p.add(q.limit, 'integer')}`;
  return (h.stmt(sql).all(...p.values) as Raw[]).map(toApprovalRow);
}

export function updateApproval(h: SqliteHandle, w: ApprovalUpdate): ApprovalRow | null {
  return h.tx(() => {
    const cur = h
      .stmt(`SELECT a.*, t.no AS task_no, t.status AS task_status, t.epoch AS task_epoch FROM stepwise_approvals a JOIN stepwise_tasks t ON t.id = a.task_id WHERE a.id = ?`)
      .get(w.id) as (Raw & { version: number; task_id: string; task_no: number; task_status: TaskStatus; task_epoch: number }) | undefined;
    if (!cur || !approvalGuardPasses(w, cur.version, { status: cur.task_status, epoch: cur.task_epoch })) return null;
    // The engine's clock is this store's clock: the plan judges at `at`.
    const change: ApprovalChange | null = w.plan ? w.plan(toApprovalRow(cur), w.at) : w;
    if (!change) return toApprovalRow(cur);
    const p = new SqliteParams();
    const row = h.stmt(approvalUpdateSql('stepwise_approvals', w.id, change.set, p)).get(...p.values) as Raw;
    h.append(cur.task_no, w.at, change.log);
    if (change.wake) {
      const res = h
        .stmt(
          `INSERT INTO stepwise_signals (task_id, name, payload, idempotency_key, created_at) VALUES (?, ?, NULL, ?, ?)
         ON CONFLICT (task_id, idempotency_key) DO NOTHING`,
        )
        .run(cur.task_id, change.wake.name, change.wake.key, w.at);
      if (res.changes === 1) {
        h.stmt(`UPDATE stepwise_tasks SET run_at = ? WHERE no = ? AND instr(wait_events, '|' || ? || '|') > 0`).run(w.at, cur.task_no, change.wake.name);
      }
    }
    return toApprovalRow(row);
  });
}

/** Entries that change nothing else about the task, guarded (and bumped) by its version. */
export function appendEvents(h: SqliteHandle, w: LogAppend): boolean {
  return h.tx(() => {
    const row = h.stmt('UPDATE stepwise_tasks SET version = version + 1 WHERE id = ? AND version = ? RETURNING no').get(w.taskId, w.version) as { no: number } | undefined;
    if (!row) return false;
    h.append(row.no, w.at, w.log);
    return true;
  });
}
