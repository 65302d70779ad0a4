/**
 * @module sqlite/key-queues
 * Internal: not part of the public API.
 * Tasks held back behind their concurrency key on SQLite (sql/sqlite/000025_key_queue.sql): the
 * hold decided at start, the claim's condition that leaves held tasks out, and the release pass.
 * SQLite has one writer, so a start and the release by a lease's end (a trigger) never interleave;
 * the pass releases what a write outside those rules left held (a debounced start moved, say).
 */
import type { NewTask } from '../store.ts';
import type { SqliteContext } from './context.ts';

/** The claim's condition on rows of the due index (it repeats the index's own WHERE term). */
export const NOT_HELD = 'held_by_key = 0';

/** Tasks of a key holding a lease plus, ahead of a task (due order, then id), its queued ones. */
const AHEAD_SQL = `SELECT (SELECT count(*) FROM stepwise_tasks y WHERE y.concurrency_key = ? AND y.status IN ('running', 'cancelling'))
  + (SELECT count(*) FROM (SELECT 1 FROM stepwise_tasks y WHERE y.concurrency_key = ? AND y.status IN ('pending', 'waiting')
      AND (y.held_by_key = 1 OR y.run_at <= ?) AND ((y.run_at - y.priority * 1000), y.id) < (?, ?) LIMIT ?)) AS n`;

/**
 * Whether a new task starts held: it is due at once and its key already has `limit` tasks leased
 * or queued ahead of it (inside the start's write transaction).
 */
export function heldAtStart(c: SqliteContext, task: NewTask): boolean {
  const key = task.concurrencyKey;
  const limit = task.concurrencyLimit;
  if (key == null || limit == null || task.runAt > task.createdAt || (task.status !== 'pending' && task.status !== 'waiting')) return false;
  const due = task.runAt - (task.priority ?? 0) * 1000;
  const row = c.stmt(AHEAD_SQL).get(key, key, task.createdAt, due, task.id, limit) as { n: number };
  return Number(row.n) >= limit;
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
