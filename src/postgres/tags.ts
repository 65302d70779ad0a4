/**
 * @module postgres/tags
 * Internal: not part of the public API.
 * A change of a task's tags on PostgreSQL: the row's column and the tag index, in one transaction
 * that holds the task row's lock (two changes of one task's tags apply one after the other).
 */
import { mergeTags, tagsColumn } from '../store-sql/tags.ts';
import type { TagChange } from '../store.ts';
import { run, tx, type PgContext } from './connection.ts';
import { LEASED_SQL } from './sql-text.ts';

export async function setTags(c: PgContext, taskId: string, change: TagChange): Promise<Record<string, string> | 'too-many' | null> {
  const t = c.t;
  return run(c, () =>
    tx(c, async (client) => {
      const fence = change.epoch === undefined ? '' : ` AND epoch = $2 AND (status IN (${LEASED_SQL})) IS TRUE`;
      const args: unknown[] = change.epoch === undefined ? [taskId] : [taskId, change.epoch];
      const { rows } = await client.query<{ tags: string | null }>(`SELECT tags FROM ${t.tasks} WHERE id = $1${fence} FOR NO KEY UPDATE`, args);
      const row = rows[0];
      if (!row) return null;
      const merged = mergeTags(row.tags, change);
      if (merged === 'too-many') return merged;
      if (!merged.drop.length && !merged.add.length) return merged.tags;
      await client.query(
        `WITH u AS (UPDATE ${t.tasks} SET tags = $2 WHERE id = $1),
           d AS (DELETE FROM ${t.tags} WHERE task_id = $1 AND (key, value) IN (SELECT * FROM unnest($3::text[], $4::text[])))
         INSERT INTO ${t.tags} (key, value, task_id) SELECT k, v, $1 FROM unnest($5::text[], $6::text[]) AS a(k, v) ON CONFLICT DO NOTHING`,
        [taskId, tagsColumn(merged.tags), ...columns(merged.drop), ...columns(merged.add)],
      );
      return merged.tags;
    }),
  );
}

const columns = (pairs: ReadonlyArray<[string, string]>): [string[], string[]] => [pairs.map((p) => p[0]), pairs.map((p) => p[1])];
