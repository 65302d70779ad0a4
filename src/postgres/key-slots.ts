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

/**
 * A candidate's condition: no key, or a task at the head of its key's due queue: the key's slots
 * taken plus the tasks of the key due before it are fewer than its limit. Both are index probes
 * (the slot table's key, and `tasks_key_due`, read at most `limit` rows). So a claim takes no
 * more tasks of a key than it has room for, in due order. A full key's backlog is held at start
 * (key-queues.ts), out of the index the claim reads, so the probes run mostly for tasks that can
 * run. `now` is the claim's due time (SQL).
 */
export function keyRoomSql(t: Tables, alias: string, now: string): string {
  const a = alias;
  const taken = `(SELECT count(*) FROM ${t.slots} s WHERE s.key = ${a}.concurrency_key)`;
  return `(${a}.concurrency_key IS NULL OR ${taken} + (
      SELECT count(*) FROM (SELECT 1 FROM ${t.tasks} x WHERE x.concurrency_key = ${a}.concurrency_key AND x.status IN ('pending', 'waiting')
        AND x.run_at <= ${now} AND (x.run_at - x.priority::bigint * 1000, x.id) < (${a}.run_at - ${a}.priority::bigint * 1000, ${a}.id)
        LIMIT ${a}.concurrency_limit) h) < ${a}.concurrency_limit)`;
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
