/**
 * @module postgres/append-events
 * Internal: not part of the public API.
 * Appending entries to a task's log on their own (an idempotency hit met by a step, for
 * instance): one statement that takes their seqs from the task's log counter (`event_seq` on its head, see
 * sql/postgres/000026_task_heads.sql) and inserts them, so they are numbered like every other entry.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import type { NewEvent } from '../store.ts';
import { bumpHeadSql } from './heads.ts';

export async function appendTaskEvents(c: PgContext, taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean> {
  if (!entries.length) return (await run(c, () => rows(c, poolOf(c), `SELECT 1 FROM ${c.t.tasks} WHERE id = $1`, [taskId]))).length === 1;
  const n = entries.length;
  const text = `WITH f AS (${bumpHeadSql(c.t, '$1::text', '$2::integer')})
    INSERT INTO ${c.t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
    SELECT $1::text, f.event_seq - $2::integer + e.ord::integer, $3::bigint, e.type, e.actor_kind, e.actor_id, e.data
    FROM f, unnest($4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS e(type, actor_kind, actor_id, data, ord)
    RETURNING 1 AS ok`;
  const values = [taskId, n, at, entries.map((e) => e.type), entries.map((e) => e.actorKind), entries.map((e) => e.actorId), entries.map((e) => e.data)];
  return (await run(c, () => rows(c, poolOf(c), text, values))).length === n;
}
