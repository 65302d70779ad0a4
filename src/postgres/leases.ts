/**
 * @module postgres/leases
 * Internal: not part of the public API.
 * Lease upkeep on PostgreSQL: a worker's heartbeat (renewing the leases it still holds), the
 * expiry of leases whose holder stopped renewing them, and when the next task falls due.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import { DB_NOW_MS, LEASED_SQL, Params, assignments, heartbeatSql, lockEachInIdOrder, nextDueSql, sqlStatuses, type Tables } from './sql-text.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { copiedRows, writeHeadsSql } from './heads.ts';
import type { ExpireRequest, HeartbeatRequest, HeldTask, NextRunRequest } from '../store.ts';

/** The workers holding live leases (by the database's clock; `now` is not used). */
export async function leaseOwners(c: PgContext, _now: number): Promise<string[]> {
  return run(c, async () =>
    (await rows(c, poolOf(c), `SELECT DISTINCT lease_owner FROM ${c.t.tasks} WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ${DB_NOW_MS} AND lease_owner IS NOT NULL`)).map((r) =>
      String(r.lease_owner),
    ),
  );
}

/**
 * Ends the live leases of `owner` now (the database's now), so that the next claim reclaims its
 * tasks. The rows are locked in id order first, as every multi-row writer here locks them (a scan
 * order would deadlock with a write batch over the same tasks); the update then tests each row as
 * it stands once locked.
 */
export async function endLeasesOf(c: PgContext, owner: string, _now: number): Promise<number> {
  return run(
    c,
    async () =>
      (
        await rows(
          c,
          poolOf(c),
          `WITH n AS (SELECT ${DB_NOW_MS} AS now),
            held AS (SELECT id FROM ${c.t.tasks}, n WHERE lease_owner = $1 AND status IN (${LEASED_SQL}) AND lease_expires_at > n.now),
            k AS (${lockEachInIdOrder(c.t, 'held u')})
      UPDATE ${c.t.tasks} t SET lease_expires_at = n.now FROM n, k
      WHERE t.id = k.id AND t.lease_owner = $1 AND t.status IN (${LEASED_SQL}) AND t.lease_expires_at > n.now RETURNING 1`,
          [owner],
        )
      ).length,
  );
}

/** A run's progress report, written only while the task is leased at `epoch` (by primary key). */
export async function setProgress(c: PgContext, taskId: string, epoch: number, progress: string): Promise<boolean> {
  return run(c, async () => {
    const done = await rows(c, poolOf(c), `UPDATE ${c.t.tasks} SET progress = $3 WHERE id = $1 AND epoch = $2 AND (status IN (${LEASED_SQL})) IS TRUE RETURNING 1 AS ok`, [
      taskId,
      epoch,
      progress,
    ]);
    return done.length === 1;
  });
}

/** Renews the leases still held for `leaseMs` from the database's now. */
export async function heartbeat(c: PgContext, r: HeartbeatRequest): Promise<HeldTask[]> {
  if (!r.held.length) return [];
  return run(c, async () => {
    const renewed = await rows(c, poolOf(c), heartbeatSql(c.t), [r.leaseMs, r.held.map((h) => h.taskId), r.held.map((h) => h.epoch), r.workerId]);
    const byId = new Map(renewed.map((row) => [String(row.id), row]));
    const out: HeldTask[] = [];
    for (const h of r.held) {
      const row = byId.get(h.taskId);
      if (!row) continue;
      byId.delete(h.taskId);
      out.push({
        taskId: h.taskId,
        status: row.status as TaskStatus,
        pauseRequested: row.pause_requested === true,
        cancelReason: (row.cancel_reason as string | null) ?? null,
      });
    }
    return out;
  });
}

/** When the next task of one of the workflows falls due after `after` (see {@link nextDueSql}). */
export async function nextRunAt(c: PgContext, r: NextRunRequest): Promise<number | null> {
  if (!r.workflows.length) return null;
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), nextDueSql(c.t), [r.after, r.workflows]);
    return row ? Number(row.run_at) : null;
  });
}

/** The statement of {@link expireLeases}: takes the expired tasks (skipping locked ones), each with its log entry; returns their count as `n`. */
export function expireLeasesSql(t: Tables, r: ExpireRequest): { text: string; values: unknown[] } {
  const p = new Params();
  const now = p.add(r.now, 'bigint');
  const to = p.add(r.to, 'text');
  const sets = assignments(r.set, p);
  const note =
    r.note === undefined
      ? `json_build_object('reason', 'lease expired', 'previousOwner', x_owner)`
      : `json_build_object('reason', 'lease expired', 'previousOwner', x_owner,
         'note', replace(replace(${p.add(r.note, 'text')}, '{workflow}', x_workflow), '{version}', x_version))`;
  const text = `WITH x AS (
           SELECT id AS x_id, status AS x_status, epoch AS x_epoch, lease_owner AS x_owner, workflow AS x_workflow, workflow_version AS x_version
           FROM ${t.tasks}
           WHERE status IN (${sqlStatuses(r.from)}) AND lease_expires_at <= ${DB_NOW_MS} - ${p.add(r.expiredForMs ?? 0, 'bigint')}
           FOR UPDATE SKIP LOCKED
         ), u AS (
           UPDATE ${t.tasks} AS t SET status = ${to}, version = t.version + 1, updated_at = ${now}${sets}
           FROM x WHERE t.id = x.x_id RETURNING t.id, t.status, t.epoch, t.lease_owner, x.*
         ), ${writeHeadsSql(t, 'hd', copiedRows('u', '1', 'x_status, x_owner, x_workflow, x_version'))}, h AS (
           INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
           SELECT id, event_seq, ${now}, 'transition', 'system', 'lease-expiry',
             json_build_object('event', ${p.add(r.event, 'text')}, 'from', x_status, 'to', ${to},
               'detail', ${note})::text
           FROM hd
         )
         SELECT count(*)::int AS n FROM u`;
  return { text, values: p.values };
}

/**
 * One statement; tasks another transaction holds (being claimed or renewed) are skipped. Expiry
 * is judged by the database's clock; `now` dates the change.
 */
export async function expireLeases(c: PgContext, r: ExpireRequest): Promise<number> {
  if (!r.from.length) return 0;
  return run(c, async () => {
    const { text, values } = expireLeasesSql(c.t, r);
    const [row] = await rows(c, poolOf(c), text, values);
    return Number(row?.n ?? 0);
  });
}
