/**
 * @module postgres/alerts
 * Internal: not part of the public API.
 * The raised alerts on PostgreSQL (see store/alerts.ts).
 */
import type { AlertQuery, AlertRow } from '../store.ts';
import { toAlertRow } from '../rows.ts';
import { poolOf, rows, run, type PgContext } from './connection.ts';

export async function insertAlert(c: PgContext, a: AlertRow): Promise<void> {
  await run(c, () =>
    rows(
      c,
      poolOf(c),
      `INSERT INTO ${c.t.alerts} (id, kind, subject, workflow, task_id, message, data, raised_at, raised_by, dedupe) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
      [a.id, a.kind, a.subject, a.workflow, a.taskId, a.message, a.data, a.raisedAt, a.raisedBy, a.dedupe],
    ),
  );
}

export async function listAlerts(c: PgContext, q: AlertQuery): Promise<AlertRow[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (v: unknown): string => `$${params.push(v)}`;
  if (q.kinds) where.push(`kind = ANY(${add(q.kinds)}::text[])`);
  if (q.workflow !== undefined) where.push(`workflow = ${add(q.workflow)}`);
  if (q.taskId !== undefined) where.push(`task_id = ${add(q.taskId)}`);
  if (q.before !== undefined) where.push(`id < ${add(q.before)}`);
  const sql = `SELECT * FROM ${c.t.alerts}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ${add(q.limit)}`;
  return (await run(c, () => rows(c, poolOf(c), sql, params))).map(toAlertRow);
}

export async function purgeAlerts(c: PgContext, before: number, limit: number): Promise<number> {
  const deleted = await run(c, () =>
    rows(c, poolOf(c), `DELETE FROM ${c.t.alerts} WHERE id IN (SELECT id FROM ${c.t.alerts} WHERE raised_at < $1 ORDER BY raised_at LIMIT $2) RETURNING id`, [before, limit]),
  );
  return deleted.length;
}
