/**
 * @module sqlite/leases
 * Internal: not part of the public API.
 * Leases on SQLite: heartbeats (which also report pause and cancel requests), progress notes, the
 * live lease owners, ending a stopped worker's leases, expiring dead ones, and the next due time
 * a worker sleeps until.
 */
import { transitionEntry } from '../log-entries.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { ExpireRequest, HeartbeatRequest, HeldTask, NextRunRequest } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { DUE_INDEX, LEASED_SQL, inList, statusList, statusTerm } from './sql.ts';

export function setProgress(c: SqliteContext, taskId: string, epoch: number, progress: string): boolean {
  return c.translate(() => c.stmt(`UPDATE stepwise_tasks SET progress = ? WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL})`).run(progress, taskId, epoch).changes === 1);
}

export function heartbeat(c: SqliteContext, r: HeartbeatRequest): HeldTask[] {
  if (!r.held.length) return [];
  return c.tx(() => {
    const out: HeldTask[] = [];
    const stmt = c.stmt(
      `UPDATE stepwise_tasks SET lease_expires_at = ? WHERE id = ? AND epoch = ? AND lease_owner = ? AND status IN (${LEASED_SQL})
       RETURNING id, status, pause_requested, cancel_reason`,
    );
    for (const h of r.held) {
      const row = stmt.get(r.now + r.leaseMs, h.taskId, h.epoch, r.workerId) as Raw | undefined;
      if (row) {
        out.push({
          taskId: String(row.id),
          status: row.status as TaskStatus,
          pauseRequested: row.pause_requested === 1,
          cancelReason: (row.cancel_reason as string | null) ?? null,
        });
      }
    }
    return out;
  });
}

export function nextRunAt(c: SqliteContext, r: NextRunRequest): number | null {
  if (!r.workflows.length) return null;
  // The due index in run_at order, from `after` on, until a task of one of the workflows.
  const row = c.translate(() =>
    c
      .stmt(
        `SELECT run_at FROM stepwise_tasks WHERE ${statusTerm(DUE_INDEX, DUE_INDEX)} AND run_at > ? AND +workflow IN (${inList(r.workflows.length)})
       ORDER BY run_at LIMIT 1`,
      )
      .get(r.after, ...r.workflows),
  ) as Raw | undefined;
  return row ? Number(row.run_at) : null;
}

export function leaseOwners(c: SqliteContext, now: number): string[] {
  return (
    c.stmt(`SELECT DISTINCT lease_owner FROM stepwise_tasks WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ? AND lease_owner IS NOT NULL`).all(now) as Array<{ lease_owner: string }>
  ).map((r) => r.lease_owner);
}

export function endLeasesOf(c: SqliteContext, owner: string, now: number): number {
  return c.tx(() => c.stmt(`UPDATE stepwise_tasks SET lease_expires_at = ? WHERE lease_owner = ? AND status IN (${LEASED_SQL}) AND lease_expires_at > ?`).run(now, owner, now).changes);
}

export function expireLeases(c: SqliteContext, r: ExpireRequest): number {
  return c.tx(() => {
    const rows = c
      .stmt(`SELECT no, id, status, epoch, lease_owner, workflow, workflow_version FROM stepwise_tasks WHERE status IN (${statusList(r.from)}) AND lease_expires_at <= ?`)
      .all(r.now - (r.expiredForMs ?? 0)) as Array<{ no: number; id: string; status: TaskStatus; epoch: number; lease_owner: string | null; workflow: string; workflow_version: string }>;
    const { sets, params } = c.assignments(r.set, r.now);
    for (const row of rows) {
      c.stmt(`UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets} WHERE id = ?`).run(r.to, r.now, ...params, row.id);
      const note = r.note === undefined ? {} : { note: r.note.replaceAll('{workflow}', row.workflow).replaceAll('{version}', row.workflow_version) };
      const detail = JSON.stringify({ reason: 'lease expired', previousOwner: row.lease_owner, ...note });
      c.append(row.no, r.now, [transitionEntry('system', 'lease-expiry', { event: r.event, from: row.status, to: r.to, detail })]);
    }
    return rows.length;
  });
}
