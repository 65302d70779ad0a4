/**
 * @module sqlite/key-queues
 * Internal: not part of the public API.
 * Tasks held back behind their concurrency key on SQLite (sql/sqlite/000025_key_queue.sql): the
 * hold decided at start (an expression of the INSERT), the claim's condition that leaves held tasks out, and the release pass.
 * SQLite has one writer, so a start and the release by a lease's end (a trigger) never interleave;
 * the pass releases what a write outside those rules left held (a debounced start moved, say).
 */
import type { NewTask } from '../store.ts';
import type { SqliteContext } from './context.ts';

/** The claim's condition on rows of the due index (it repeats the index's own WHERE term). */
export const NOT_HELD = 'held_by_key = 0';

/**
 * The `held_by_key` of a new row, as an expression of the INSERT with its parameters: 1 when the
 * task is due at once and its key already has `limit` tasks leased or queued ahead of it (due
 * order, then id), inside the start's write transaction. The probes run only for keyed due tasks.
 */
export const HELD_AT_START_SQL = `CASE WHEN ? THEN (SELECT count(*) FROM stepwise_tasks y WHERE y.concurrency_key = ? AND y.status IN ('running', 'cancelling'))
  + (SELECT count(*) FROM (SELECT 1 FROM stepwise_tasks y WHERE y.concurrency_key = ? AND y.status IN ('pending', 'waiting')
      AND (y.held_by_key = 1 OR y.run_at <= ?) AND ((y.run_at - y.priority * 1000), y.id) < (?, ?) LIMIT ?)) >= ? ELSE 0 END`;

/** The parameters of {@link HELD_AT_START_SQL} for a new task. */
export function heldAtStartParams(task: NewTask): unknown[] {
  const key = task.concurrencyKey ?? null;
  const limit = task.concurrencyLimit ?? null;
  const probe = key !== null && limit !== null && task.runAt <= task.createdAt && (task.status === 'pending' || task.status === 'waiting');
  return [probe ? 1 : 0, key, key, task.createdAt, task.runAt - (task.priority ?? 0) * 1000, task.id, limit, limit];
}

/** Releases the held tasks of one key now among the first `limit` minus leased of its queue. */
const RELEASE_SQL = `UPDATE stepwise_tasks SET held_by_key = 0 WHERE held_by_key = 1 AND id IN (
  SELECT x.id FROM stepwise_tasks x
  WHERE x.concurrency_key = ? AND x.status IN ('pending', 'waiting') AND (x.held_by_key = 1 OR x.run_at <= ?)
  ORDER BY (x.run_at - x.priority * 1000), x.id
  LIMIT max(0, ? - (SELECT count(*) FROM stepwise_tasks y WHERE y.concurrency_key = ? AND y.status IN ('running', 'cancelling'))))`;

/** The release pass: every key with held tasks, in one write transaction. */
export function releaseHeld(c: SqliteContext, now: number): number {
  return c.tx(() => {
    const keys = c.stmt('SELECT DISTINCT concurrency_key AS k, concurrency_limit AS lim FROM stepwise_tasks WHERE held_by_key = 1').all() as Array<{ k: string; lim: number }>;
    return keys.reduce((n, { k, lim }) => n + c.stmt(RELEASE_SQL).run(k, now, lim, k).changes, 0);
  });
}
