/**
 * @module postgres/approvals
 * Internal: not part of the public API.
 * The approval table on PostgreSQL. Every write is one transaction that locks the task row first
 * (`FOR NO KEY UPDATE`, as a signal does), so that it serializes with a transition that sets
 * `wait_events` (the park of the run that waits for the approval: see transition.ts) and with
 * other writers of the task's log, whose counter `event_seq` (on the task's head) numbers the entries it appends.
 */
import type { ClientBase } from 'pg';
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';
import { channelOf } from './listen.ts';
import { payload } from './wake.ts';
import { LEASED_STATUSES, type TaskStatus } from '../lifecycle.ts';
import { toApprovalRow } from '../store/approval-rows.ts';
import { approvalGuardPasses } from '../store-sql/guards.ts';
import { approvalTerms, whereOf } from '../store-sql/filters.ts';
import { approvalInsertSql, approvalUpdateSql } from '../store-sql/set-list.ts';
import { Params } from './sql-text.ts';
import { bumpHeadSql } from './heads.ts';
import type { ApprovalChange, ApprovalInsert, ApprovalQuery, ApprovalRow, ApprovalUpdate, LogAppend, NewEvent, WakeEvent } from '../store.ts';

/** Appends entries to the task's log, numbered from its counter (the task row is locked). */
async function append(c: PgContext, client: ClientBase, taskId: string, at: number, entries: readonly NewEvent[]): Promise<void> {
  if (!entries.length) return;
  const [bumped] = await rows(c, client, bumpHeadSql(c.t, '$1', '$2'), [taskId, entries.length]);
  const last = Number(bumped?.event_seq);
  await rows(
    c,
    client,
    `INSERT INTO ${c.t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
     SELECT $1, s, $2, t, k, i, d FROM unnest($3::integer[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(s, t, k, i, d)`,
    [
      taskId,
      at,
      entries.map((_, n) => last - entries.length + 1 + n),
      entries.map((e) => e.type),
      entries.map((e) => e.actorKind),
      entries.map((e) => e.actorId),
      entries.map((e) => e.data),
    ],
  );
}

async function announce(c: PgContext, client: ClientBase, event: WakeEvent | undefined): Promise<void> {
  if (event) await rows(c, client, 'SELECT pg_notify($1, $2)', [channelOf(c, event), payload(event)]);
}

export async function insertApproval(c: PgContext, w: ApprovalInsert): Promise<{ approval: ApprovalRow; created: boolean } | null> {
  return run(c, () =>
    tx(c, async (client) => {
      const [task] = await rows(c, client, `SELECT status, epoch FROM ${c.t.tasks} WHERE id = $1 FOR NO KEY UPDATE`, [w.approval.taskId]);
      if (!task || Number(task.epoch) !== w.epoch || !LEASED_STATUSES.includes(task.status as TaskStatus)) return null;
      const p = new Params();
      const [row] = await rows(c, client, approvalInsertSql(c.t.approvals, w.approval, p), p.values);
      if (row) {
        await append(c, client, w.approval.taskId, w.at, w.log);
        return { approval: toApprovalRow(row), created: true };
      }
      const [existing] = await rows(c, client, `SELECT * FROM ${c.t.approvals} WHERE task_id = $1 AND call_key = $2`, [w.approval.taskId, w.approval.callKey]);
      return { approval: toApprovalRow(existing as Record<string, unknown>), created: false };
    }),
  );
}

export async function getApproval(c: PgContext, id: string): Promise<ApprovalRow | null> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), `SELECT * FROM ${c.t.approvals} WHERE id = $1`, [id]);
    return row ? toApprovalRow(row) : null;
  });
}

export async function listApprovals(c: PgContext, q: ApprovalQuery): Promise<ApprovalRow[]> {
  return run(c, async () => {
    const p = new Params();
    const text = `SELECT * FROM ${c.t.approvals} ${whereOf(approvalTerms(q, p, c.t.tasks))} ORDER BY created_at, id LIMIT ${p.add(q.limit, 'integer')}`;
    return (await rows(c, poolOf(c), text, p.values)).map(toApprovalRow);
  });
}

export async function updateApproval(c: PgContext, w: ApprovalUpdate): Promise<ApprovalRow | null> {
  return run(c, () =>
    tx(c, async (client) => {
      const [found] = await rows(c, client, `SELECT task_id FROM ${c.t.approvals} WHERE id = $1`, [w.id]);
      if (!found) return null;
      const taskId = String(found.task_id);
      // The task first (the order every writer of a task takes), then the approval.
      const [task] = await rows(c, client, `SELECT status, epoch FROM ${c.t.tasks} WHERE id = $1 FOR NO KEY UPDATE`, [taskId]);
      const [cur] = await rows(c, client, `SELECT *, (extract(epoch FROM now()) * 1000)::bigint AS stepwise_db_now FROM ${c.t.approvals} WHERE id = $1 FOR UPDATE`, [w.id]);
      if (!task || !cur || !approvalGuardPasses(w, Number(cur.version), { status: task.status as TaskStatus, epoch: Number(task.epoch) })) return null;
      // The plan judges by the later of the engine's clock and the database's.
      const change: ApprovalChange | null = w.plan ? w.plan(toApprovalRow(cur), Math.max(w.at, Number(cur.stepwise_db_now))) : w;
      if (!change) return toApprovalRow(cur);
      const p = new Params();
      const [row] = await rows(c, client, approvalUpdateSql(c.t.approvals, w.id, change.set, p), p.values);
      await append(c, client, taskId, w.at, change.log);
      if (change.wake) {
        const [signal] = await rows(
          c,
          client,
          `INSERT INTO ${c.t.signals} (task_id, name, payload, idempotency_key, created_at) VALUES ($1, $2, NULL, $3, $4)
           ON CONFLICT (task_id, idempotency_key) DO NOTHING RETURNING id`,
          [taskId, change.wake.name, change.wake.key, w.at],
        );
        if (signal) {
          await rows(c, client, `UPDATE ${c.t.tasks} SET run_at = $2 WHERE id = $1 AND strpos(wait_events, '|' || $3 || '|') > 0`, [taskId, w.at, change.wake.name]);
        }
      }
      await announce(c, client, change.notify);
      return toApprovalRow(row as Record<string, unknown>);
    }),
  );
}

/** Entries that change nothing else about the task, guarded (and bumped) by its version. */
export async function appendEvents(c: PgContext, w: LogAppend): Promise<boolean> {
  return run(c, () =>
    tx(c, async (client) => {
      const [row] = await rows(c, client, `UPDATE ${c.t.tasks} SET version = version + 1 WHERE id = $1 AND version = $2 RETURNING id`, [w.taskId, w.version]);
      if (!row) return false;
      await append(c, client, w.taskId, w.at, w.log);
      return true;
    }),
  );
}
