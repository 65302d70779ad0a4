/**
 * @module sqlite/retention
 * Internal: not part of the public API.
 * Deleting finished tasks on SQLite (and counting tasks by the same selection): inside one `BEGIN IMMEDIATE` transaction (the caller's), the
 * tasks are picked (oldest id first) and deleted with their journal, log, signals, approvals and
 * stream chunks.
 *
 * The log's newest row is never deleted: SQLite gives a new row the largest rowid plus one, so
 * deleting the row with the largest `id` would hand its id out again, and a reader of every task's
 * log that had read up to it (its cursor is that id) would pass over the entry that gets it. That
 * row is emptied instead and left to no task (`task_no` below zero, which no task has); later
 * deletions remove such rows once they are no longer the newest.
 */
import { SqliteParams } from './sql.ts';
import { keptWhileParentLive, selectionCondition, selectsNothing } from '../store-sql/filters.ts';
import { toDeletionRecord } from '../store-sql/decoders.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { DeletedTask, DeletionNote, DeletionRecord, TaskSelection } from '../store.ts';
import type Database from 'better-sqlite3';

/** What the store facade lends this module. */
export interface RetentionHandle {
  stmt(sql: string): Database.Statement;
}

/** The WHERE condition of a deletion on the tasks table, and its parameters. */
function selection(d: TaskSelection): { where: string; params: unknown[] } {
  const p = new SqliteParams();
  return { where: selectionCondition(d, p), params: p.values };
}

/** Call inside a write transaction. Returns the deleted tasks with their internal keys. */
export function deleteTasks(h: RetentionHandle, d: TaskSelection, limit: number, note?: DeletionNote): Array<DeletedTask & { no: number }> {
  if (selectsNothing(d)) return [];
  const { where, params } = selection(d);
  const picked = (
    h.stmt(`SELECT no, id, workflow, status FROM stepwise_tasks WHERE ${where}${keptWhileParentLive(d, 'stepwise_tasks')} ORDER BY id LIMIT ?`).all(...params, limit) as Array<
      Record<string, unknown>
    >
  ).map((r) => ({
    no: Number(r.no),
    id: String(r.id),
    workflow: String(r.workflow),
    status: r.status as TaskStatus,
  }));
  if (!picked.length) return [];
  const nos = JSON.stringify(picked.map((t) => t.no));
  const ids = JSON.stringify(picked.map((t) => t.id));
  const newest = h.stmt('SELECT id, task_no FROM stepwise_events ORDER BY id DESC LIMIT 1').get() as { id: number; task_no: number } | undefined;
  if (newest && picked.some((t) => t.no === newest.task_no)) {
    h.stmt(`UPDATE stepwise_events SET task_no = -id, seq = 0, type = 'purged', actor_kind = 'system', actor_id = 'retention', data = NULL WHERE id = ?`).run(newest.id);
  }
  h.stmt('DELETE FROM stepwise_events WHERE task_no < 0 AND id < (SELECT max(id) FROM stepwise_events)').run();
  h.stmt('DELETE FROM stepwise_events WHERE task_no IN (SELECT value FROM json_each(?))').run(nos);
  h.stmt('DELETE FROM stepwise_steps WHERE task_no IN (SELECT value FROM json_each(?))').run(nos);
  h.stmt('DELETE FROM stepwise_signals WHERE task_id IN (SELECT value FROM json_each(?))').run(ids);
  h.stmt('DELETE FROM stepwise_approvals WHERE task_id IN (SELECT value FROM json_each(?))').run(ids);
  h.stmt('DELETE FROM stepwise_stream_chunks WHERE task_id IN (SELECT value FROM json_each(?))').run(ids);
  h.stmt('DELETE FROM stepwise_task_tags WHERE task_id IN (SELECT value FROM json_each(?))').run(ids);
  h.stmt('DELETE FROM stepwise_task_blobs WHERE task_id IN (SELECT value FROM json_each(?))').run(ids);
  h.stmt('DELETE FROM stepwise_tasks WHERE no IN (SELECT value FROM json_each(?))').run(nos);
  if (note) recordDeletions(h, picked, note);
  return picked;
}

/** Counts by status; with a cap, each status up to `cap` rows. */
export function countTasks(h: RetentionHandle, d: TaskSelection, cap?: number): Partial<Record<TaskStatus, number>> {
  if (selectsNothing(d)) return {};
  if (cap === undefined) {
    const { where, params } = selection(d);
    const found = h.stmt(`SELECT status, count(*) AS n FROM stepwise_tasks WHERE ${where} GROUP BY status`).all(...params) as Array<Record<string, unknown>>;
    return Object.fromEntries(found.map((r) => [String(r.status), Number(r.n)]));
  }
  const out: Partial<Record<TaskStatus, number>> = {};
  for (const status of d.statuses) {
    const { where, params } = selection({ ...d, statuses: [status] });
    const n = Number(
      h
        .stmt(`SELECT count(*) FROM (SELECT 1 FROM stepwise_tasks WHERE ${where} LIMIT ?)`)
        .pluck()
        .get(...params, cap),
    );
    if (n > 0) out[status] = n;
  }
  return out;
}

/** Call inside the deletion's transaction: a deletion record per task (see `DeletionNote`). */
function recordDeletions(h: RetentionHandle, tasks: readonly DeletedTask[], note: DeletionNote): void {
  const insert = h.stmt('INSERT INTO stepwise_deletions (task_id, workflow, status, reason, actor_kind, actor_id, at, deliver_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  for (const t of tasks) insert.run(t.id, t.workflow, t.status, note.reason, note.by.kind, note.by.id, note.at, note.deliverAfter);
}

/** Call inside a write transaction: the deletion records due, claimed until `now + leaseMs`. */
export function claimDeletions(h: RetentionHandle, now: number, leaseMs: number, limit: number): DeletionRecord[] {
  const found = h
    .stmt('SELECT id, task_id, workflow, status, reason, actor_kind, actor_id, at FROM stepwise_deletions WHERE deliver_after <= ? ORDER BY deliver_after, id LIMIT ?')
    .all(now, limit) as Array<Record<string, unknown>>;
  if (!found.length) return [];
  h.stmt('UPDATE stepwise_deletions SET deliver_after = ? WHERE id IN (SELECT value FROM json_each(?))').run(now + leaseMs, JSON.stringify(found.map((r) => Number(r.id))));
  return found.map(toDeletionRecord);
}

/** Removes the deletion records of these tasks (reported). */
export function ackDeletions(h: RetentionHandle, taskIds: readonly string[]): void {
  if (taskIds.length) h.stmt('DELETE FROM stepwise_deletions WHERE task_id IN (SELECT value FROM json_each(?))').run(JSON.stringify(taskIds));
}
