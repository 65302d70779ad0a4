/**
 * @module postgres/key-queues
 * Internal: not part of the public API.
 * Tasks held back behind their concurrency key on PostgreSQL (sql/postgres/000025_key_queue.sql):
 * the hold decided by the start statement, and the release pass. A start decides from its
 * snapshot; a lease that ended in a transaction the snapshot did not see released the key's held
 * tasks without seeing the new one, which then stays held with room in its key until this pass
 * (every worker runs it, see `worker/background.ts`).
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import type { Tables } from './sql-text.ts';

/** The claim's condition on rows of the due index (it repeats the index's own WHERE term). */
export const NOT_HELD = 'NOT held_by_key';

/**
 * The `held_by_key` of each row of a start batch `b` (columns as in `insert.ts`): due at once,
 * keyed, and its key already has `limit` tasks leased (slots), queued ahead of it, or ahead of it
 * in the same batch. The probes run only for keyed due rows.
 */
export function heldAtStartSql(t: Tables, b: string): string {
  const due = (a: string): string => `(${a}.run_at - ${a}.priority::bigint * 1000)`;
  return `CASE WHEN ${b}.concurrency_key IS NULL OR ${b}.run_at > ${b}.created_at OR ${b}.status NOT IN ('pending', 'waiting') THEN false
    ELSE (SELECT count(*) FROM ${t.slots} s WHERE s.key = ${b}.concurrency_key)
      + (SELECT count(*) FROM (SELECT 1 FROM ${t.tasks} y WHERE y.concurrency_key = ${b}.concurrency_key AND y.status IN ('pending', 'waiting')
          AND (y.held_by_key OR y.run_at <= ${b}.created_at) AND (${due('y')}, y.id) < (${due(b)}, ${b}.id) LIMIT ${b}.concurrency_limit) a)
      + (count(*) FILTER (WHERE ${b}.concurrency_key IS NOT NULL AND ${b}.run_at <= ${b}.created_at)
          OVER (PARTITION BY ${b}.concurrency_key ORDER BY ${due(b)}, ${b}.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
      >= ${b}.concurrency_limit END`;
}

/** The release pass: `release_held` for every key with held tasks (one statement). */
export async function releaseHeld(c: PgContext, now: number): Promise<number> {
  const fn = `"${c.schema.replaceAll('"', '""')}".release_held`;
  const [row] = await run(c, () =>
    rows(
      c,
      poolOf(c),
      `SELECT coalesce(sum(${fn}(h.k, h.lim, $1::bigint)), 0)::integer AS n
       FROM (SELECT DISTINCT concurrency_key AS k, concurrency_limit AS lim FROM ${c.t.tasks} WHERE held_by_key) h`,
      [now],
    ),
  );
  return Number(row?.n ?? 0);
}
