/**
 * @module sqlite/alerts
 * Internal: not part of the public API.
 * The raised alerts on SQLite (see store/alerts.ts).
 */
import type { AlertQuery, AlertRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { toAlertRow } from '../rows.ts';

export function insertAlert(c: SqliteContext, a: AlertRow): void {
  c.tx(() => {
    c.stmt(
      'INSERT INTO stepwise_alerts (id, kind, subject, workflow, task_id, message, data, raised_at, raised_by, dedupe) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
    ).run(a.id, a.kind, a.subject, a.workflow, a.taskId, a.message, a.data, a.raisedAt, a.raisedBy, a.dedupe);
  });
}

export function listAlerts(c: SqliteContext, q: AlertQuery): AlertRow[] {
  const where: string[] = [];
  const params: unknown[] = [];
  if (q.kinds) {
    where.push('kind IN (SELECT value FROM json_each(?))');
    params.push(JSON.stringify(q.kinds));
  }
  if (q.workflow !== undefined) {
    where.push('workflow = ?');
    params.push(q.workflow);
  }
  if (q.taskId !== undefined) {
    where.push('task_id = ?');
    params.push(q.taskId);
  }
  if (q.before !== undefined) {
    where.push('id < ?');
    params.push(q.before);
  }
  const sql = `SELECT * FROM stepwise_alerts${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`;
  return (c.stmt(sql).all(...params, q.limit) as Raw[]).map(toAlertRow);
}

export function purgeAlerts(c: SqliteContext, before: number, limit: number): number {
  return c.tx(() => c.stmt('DELETE FROM stepwise_alerts WHERE id IN (SELECT id FROM stepwise_alerts WHERE raised_at < ? ORDER BY raised_at LIMIT ?)').run(before, limit).changes);
}
