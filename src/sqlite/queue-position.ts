/**
 * @module sqlite/queue-position
 * Internal: not part of the public API.
 * Why a due task waits, for `explain`: the tasks of its key holding a lease, the due tasks of its
 * key queued before it, and the due tasks ahead of it in claim order that have a higher priority.
 */
import type { QueuePosition, TaskRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { LEASED_SQL } from './sql.ts';

export function queuePosition(c: SqliteContext, task: TaskRow, now: number): QueuePosition {
  const due = (task.runAt ?? now) - task.priority * 1000;
  const row = c
    .stmt(
      `SELECT CASE WHEN ? IS NULL THEN NULL ELSE (SELECT count(*) FROM stepwise_tasks WHERE concurrency_key = ? AND status IN (${LEASED_SQL})) END AS key_leased,
         CASE WHEN ? IS NULL THEN NULL ELSE (SELECT count(*) FROM (SELECT 1 FROM stepwise_tasks WHERE concurrency_key = ? AND status IN ('pending', 'waiting')
           AND run_at <= ? AND ((run_at - priority * 1000), id) < (?, ?) LIMIT ?)) END AS key_ahead,
         (SELECT count(*) FROM stepwise_tasks WHERE status IN ('pending', 'waiting') AND held_by_key = 0 AND run_at <= ? AND (run_at - priority * 1000) <= ?
           AND ((run_at - priority * 1000), id) < (?, ?) AND priority > ?) AS ahead`,
    )
    .get(task.concurrencyKey, task.concurrencyKey, task.concurrencyKey, task.concurrencyKey, now, due, task.id, task.concurrencyLimit ?? 0, now, due, due, task.id, task.priority) as Raw;
  const count = (v: unknown): number | null => (v === null ? null : Number(v));
  return { keyLeased: count(row.key_leased), keyAhead: count(row.key_ahead), aheadByPriority: Number(row.ahead) };
}
