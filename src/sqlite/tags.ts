/**
 * @module sqlite/tags
 * Internal: not part of the public API.
 * A change of a task's tags on SQLite: the row's column and the tag index, in one transaction.
 */
import { mergeTags, tagsColumn } from '../store-sql/tags.ts';
import type { TagChange } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { LEASED_SQL } from './sql.ts';

export function setTags(c: SqliteContext, taskId: string, change: TagChange): Record<string, string> | 'too-many' | null {
  return c.tx(() => {
    const fence = change.epoch === undefined ? '' : ` AND epoch = ? AND status IN (${LEASED_SQL})`;
    const args: unknown[] = change.epoch === undefined ? [taskId] : [taskId, change.epoch];
    const row = c.stmt(`SELECT tags FROM stepwise_tasks WHERE id = ?${fence}`).get(...args) as Raw | undefined;
    if (!row) return null;
    const merged = mergeTags((row.tags as string | null) ?? null, change);
    if (merged === 'too-many') return merged;
    if (!merged.drop.length && !merged.add.length) return merged.tags;
    c.stmt('UPDATE stepwise_tasks SET tags = ? WHERE id = ?').run(tagsColumn(merged.tags), taskId);
    const drop = c.stmt('DELETE FROM stepwise_task_tags WHERE key = ? AND value = ? AND task_id = ?');
    for (const [key, value] of merged.drop) drop.run(key, value, taskId);
    const add = c.stmt('INSERT OR IGNORE INTO stepwise_task_tags (key, value, task_id) VALUES (?, ?, ?)');
    for (const [key, value] of merged.add) add.run(key, value, taskId);
    return merged.tags;
  });
}
