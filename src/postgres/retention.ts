/**
 * @module postgres/retention
 * Internal: not part of the public API.
 * Deleting finished tasks on PostgreSQL, and counting tasks by the same selection. A deletion is
 * one transaction: a statement picks and locks the tasks (oldest id first, skipping rows another
 * transaction holds), the next deletes each with its journal, log, signals, approvals and stream
 * chunks. Every writer of a task's rows but a checkpoint locks the task row first (a signal, a
 * decision, a log append), so a task picked here has no writer in flight, and one whose writer
 * comes later finds no task; a checkpoint is fenced by the task's head, whose status a finished
 * task's end wrote (after any checkpoint that held the head had committed).
 *
 * The scan is bounded by `idBefore` (ids begin with their creation time): by the primary key, by
 * `tasks_workflow (workflow, id)` for some workflows, or by `tasks_status (status, id)` for a
 * status other than `succeeded`. No index of finish times is kept: it would cost a write per
 * finished task on the hot path, for a sweep that runs every few minutes.
 */
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';
import { Params, type Tables } from './sql-text.ts';
import { keptWhileParentLive, selectionCondition, selectsNothing } from '../store-sql/filters.ts';
import { toDeletionRecord } from '../store-sql/decoders.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { DeletedTask, DeletionNote, DeletionRecord, TaskSelection } from '../store.ts';

/** The WHERE condition of a deletion on the tasks table (see `store-sql/filters.ts`). */
const selection = selectionCondition;

/**
 * The statements of {@link deleteTasks} (exported for the plan tests): `pick` locks the tasks to
 * delete, `delete` deletes them with everything they own. They run in one transaction, as two
 * statements: the second takes its snapshot once the task rows are locked, so it sees every row
 * any writer of those tasks committed (a writer holds the task row's lock until it commits, and a
 * statement's own snapshot could predate a commit made just before the lock was taken: its rows
 * would be left behind, owned by no task). The deletes take their ids as an array (`= ANY($1)`),
 * which the planner always looks up by index.
 */
export function deleteTasksSql(t: Tables, d: TaskSelection, limit: number): { pick: { text: string; values: unknown[] }; delete: string } {
  const p = new Params();
  const where = selection(d, p);
  const pick = `SELECT id FROM ${t.tasks} WHERE ${where}${keptWhileParentLive(d, t.tasks)} ORDER BY id LIMIT ${p.add(limit, 'integer')} FOR UPDATE SKIP LOCKED`;
  const ids = '$1::text[]';
  const text = `WITH gone AS (
      DELETE FROM ${t.tasks} WHERE id = ANY(${ids}) RETURNING id, workflow, status
    ), heads AS (DELETE FROM ${t.heads} WHERE id IN (SELECT id FROM ${t.heads} WHERE id = ANY(${ids}) ORDER BY id FOR UPDATE)
    ), steps AS (DELETE FROM ${t.steps} WHERE task_id = ANY(${ids})
    ), events AS (DELETE FROM ${t.events} WHERE task_id = ANY(${ids})
    ), signals AS (DELETE FROM ${t.signals} WHERE task_id = ANY(${ids})
    ), approvals AS (DELETE FROM ${t.approvals} WHERE task_id = ANY(${ids})
    ), chunks AS (DELETE FROM ${t.chunks} WHERE task_id = ANY(${ids})
    ), tags AS (DELETE FROM ${t.tags} WHERE task_id = ANY(${ids})
    ), blobs AS (DELETE FROM ${t.taskBlobs} WHERE task_id = ANY(${ids}))
    SELECT id, workflow, status FROM gone ORDER BY id`;
  return { pick: { text: pick, values: p.values }, delete: text };
}

export async function deleteTasks(c: PgContext, d: TaskSelection, limit: number, note?: DeletionNote): Promise<DeletedTask[]> {
  if (selectsNothing(d)) return [];
  const sql = deleteTasksSql(c.t, d, limit);
  return run(c, () =>
    tx(c, async (client) => {
      const picked = (await rows(c, client, sql.pick.text, sql.pick.values)).map((r) => String(r.id));
      if (!picked.length) return [];
      const found = await rows(c, client, sql.delete, [picked]);
      const gone = found.map((r) => ({ id: String(r.id), workflow: String(r.workflow), status: r.status as TaskStatus }));
      if (note && gone.length) await rows(c, client, recordDeletionsSql(c.t), recordDeletionsValues(gone, note));
      return gone;
    }),
  );
}

/**
 * The statement of {@link countTasks} (exported for the plan tests). With a cap, one subquery per
 * status (each status a literal, so that a rare status is counted through the partial status
 * index) stops at `cap` rows.
 */
export function countTasksSql(t: Tables, d: TaskSelection, cap?: number): { text: string; values: unknown[] } {
  const p = new Params();
  if (cap === undefined) return { text: `SELECT status, count(*)::int AS n FROM ${t.tasks} WHERE ${selection(d, p)} GROUP BY status`, values: p.values };
  const limit = p.add(cap, 'integer');
  const text = d.statuses
    .map((s) => `SELECT '${s}' AS status, (SELECT count(*)::int FROM (SELECT 1 FROM ${t.tasks} WHERE ${selection({ ...d, statuses: [s] }, p)} LIMIT ${limit}) x) AS n`)
    .join(' UNION ALL ');
  return { text, values: p.values };
}

/** Counts by status (see {@link countTasksSql}). */
export async function countTasks(c: PgContext, d: TaskSelection, cap?: number): Promise<Partial<Record<TaskStatus, number>>> {
  if (selectsNothing(d)) return {};
  const { text, values } = countTasksSql(c.t, d, cap);
  return run(c, async () => {
    const found = await rows(c, poolOf(c), text, values);
    return Object.fromEntries(found.filter((r) => Number(r.n) > 0).map((r) => [String(r.status), Number(r.n)]));
  });
}

/** The table of deletion records, beside the tasks table (`<schema>.deletions`). */
function deletionsTable(t: Tables): string {
  return `${t.tasks.slice(0, -'.tasks'.length)}.deletions`;
}

/** Inserts a deletion record per task deleted, in the deletion's transaction (see `DeletionNote`). */
function recordDeletionsSql(t: Tables): string {
  return `INSERT INTO ${deletionsTable(t)} (task_id, workflow, status, reason, actor_kind, actor_id, at, deliver_after)
    SELECT u.id, u.workflow, u.status, $4::text, $5::text, $6::text, $7::bigint, $8::bigint
    FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, workflow, status)`;
}

function recordDeletionsValues(tasks: readonly DeletedTask[], note: DeletionNote): unknown[] {
  return [tasks.map((x) => x.id), tasks.map((x) => x.workflow), tasks.map((x) => x.status), note.reason, note.by.kind, note.by.id, note.at, note.deliverAfter];
}

/** The deletion records due, claimed until `now + leaseMs` (rows another process is claiming are passed over). */
export async function claimDeletions(c: PgContext, now: number, leaseMs: number, limit: number): Promise<DeletionRecord[]> {
  const table = deletionsTable(c.t);
  const text = `UPDATE ${table} d SET deliver_after = $2::bigint
    FROM (SELECT id FROM ${table} WHERE deliver_after <= $1::bigint ORDER BY deliver_after, id LIMIT $3::integer FOR UPDATE SKIP LOCKED) due
    WHERE d.id = due.id
    RETURNING d.task_id, d.workflow, d.status, d.reason, d.actor_kind, d.actor_id, d.at`;
  return run(c, async () => {
    const found = await rows(c, poolOf(c), text, [now, now + leaseMs, limit]);
    return found.map(toDeletionRecord);
  });
}

/** Removes the deletion records of these tasks (reported). */
export async function ackDeletions(c: PgContext, taskIds: readonly string[]): Promise<void> {
  if (!taskIds.length) return;
  await run(c, () => rows(c, poolOf(c), `DELETE FROM ${deletionsTable(c.t)} WHERE task_id = ANY($1::text[])`, [taskIds]));
}
