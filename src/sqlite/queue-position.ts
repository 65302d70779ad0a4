/**
 * @module sqlite/queue-position
 * Internal: not part of the public API.
 * Why a due task waits, for `explain`: the tasks of its key holding a lease and the due tasks
 * ahead of it in claim order that have a higher priority.
 */
import type { QueuePosition, TaskRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { LEASED_SQL } from './sql.ts';

export function queuePosition(c: SqliteContext, task: TaskRow, now: number): QueuePosition {
  const due = (task.runAt ?? now) - task.priority * 1000;
  const row = c
    .stmt(
      `SELECT CASE WHEN ? IS NULL THEN NULL ELSE (SELECT count(*) FROM stepwise_tasks WHERE concurrency_key = ? AND status IN (${LEASED_SQL})) END AS key_leased,
         (SELECT count(*) FROM stepwise_tasks WHERE status IN ('pending', 'waiting') AND held_by_key = 0 AND run_at <= ? AND (run_at - priority * 1000) <= ?
           AND ((run_at - priority * 1000), id) < (?, ?) AND priority > ?) AS ahead`,
    )
    .get(task.concurrencyKey, task.concurrencyKey, now, due, due, task.id, task.priority) as Raw;
  return { keyLeased: row.key_leased === null ? null : Number(row.key_leased), aheadByPriority: Number(row.ahead) };
}
