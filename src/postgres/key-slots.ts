/**
 * @module postgres/key-slots
 * Internal: not part of the public API.
 * The SQL of per-key concurrency limits on PostgreSQL, as parts of a claim statement. A leased
 * task of a key holds one row of `concurrency_slots`, whose (key, slot) is unique with slot in
 * 1..limit. A claim gives each keyed candidate the next slot free in its snapshot and inserts it
 * with ON CONFLICT DO NOTHING: a unique index sees rows of concurrent statements (it waits for an
 * uncommitted one), so when two claimers race for the last slot of a key one insert is left out
 * and its task is not taken. A slot freed after the snapshot is missed until the next claim: the
 * claim may take fewer tasks than it could, never more. The slot is released by a trigger when
 * the task leaves the leased statuses, and with the task when it is deleted.
 */
import type { Tables } from './sql-text.ts';

/** The order of due tasks: `run_at` moved earlier by one second per unit of priority (ageing). */
export const DUE_ORDER = '(run_at - priority::bigint * 1000)';

/** A candidate's condition: no key, or a key with a slot free (an index probe of the slot table). */
export function keyRoomSql(t: Tables, alias: string): string {
  return `(${alias}.concurrency_key IS NULL OR (SELECT count(*) FROM ${t.slots} s WHERE s.key = ${alias}.concurrency_key) < ${alias}.concurrency_limit)`;
}

/**
 * CTEs `k` and `ins`: the keyed rows of `keyed` (a relation with columns `id`, `ckey`, `clim`,
 * `due`), each given the n-th slot of its key free in the snapshot (n: its rank among the
 * candidates of its key, in due order), inserted; `ins` returns the `task_id`s that got theirs.
 */
export function takeSlotsSql(t: Tables, keyed: string): string {
  return `k AS (
      SELECT id, ckey, clim, row_number() OVER (PARTITION BY ckey ORDER BY due, id) AS rn FROM ${keyed} WHERE ckey IS NOT NULL
    ), ins AS (
      INSERT INTO ${t.slots} (key, slot, task_id)
      SELECT k.ckey, f.slot, k.id FROM k CROSS JOIN LATERAL (
        SELECT g AS slot FROM generate_series(1, k.clim) g
        WHERE NOT EXISTS (SELECT 1 FROM ${t.slots} x WHERE x.key = k.ckey AND x.slot = g)
        ORDER BY g OFFSET k.rn - 1 LIMIT 1) f
      ON CONFLICT DO NOTHING RETURNING task_id
    )`;
}
