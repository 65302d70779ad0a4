/**
 * @module postgres/queue-position
 * Internal: not part of the public API.
 * Why a due task waits, for `explain`: its key's slots taken (the tasks of the key holding a
 * lease), the due tasks of its key queued before it, and the due tasks ahead of it in claim order
 * that have a higher priority.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import { DUE_ORDER } from './key-slots.ts';
import type { QueuePosition, TaskRow } from '../store.ts';

export async function queuePosition(c: PgContext, task: TaskRow, now: number): Promise<QueuePosition> {
  return run(c, async () => {
    const [row] = await rows(
      c,
      poolOf(c),
      `SELECT CASE WHEN $1::text IS NULL THEN NULL ELSE (SELECT count(*) FROM ${c.t.slots} WHERE key = $1::text) END AS key_leased,
         CASE WHEN $1::text IS NULL THEN NULL ELSE (SELECT count(*) FROM (SELECT 1 FROM ${c.t.tasks} WHERE concurrency_key = $1::text AND status IN ('pending', 'waiting')
           AND run_at <= $2::bigint AND (${DUE_ORDER}, id) < ($3::bigint, $4::text) LIMIT $6::integer) a) END AS key_ahead,
         (SELECT count(*) FROM ${c.t.tasks} WHERE status IN ('pending', 'waiting') AND NOT held_by_key AND run_at <= $2::bigint AND ${DUE_ORDER} <= $3::bigint
           AND (${DUE_ORDER}, id) < ($3::bigint, $4::text) AND priority > $5::integer) AS ahead`,
      [task.concurrencyKey, now, (task.runAt ?? now) - task.priority * 1000, task.id, task.priority, task.concurrencyLimit ?? 0],
    );
    const count = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
    return { keyLeased: count(row?.key_leased), keyAhead: count(row?.key_ahead), aheadByPriority: Number(row?.ahead ?? 0) };
  });
}
