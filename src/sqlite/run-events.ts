/**
 * @module sqlite/run-events
 * Internal: not part of the public API.
 * What a run writes besides its journal on SQLite: usage with its log entries, stream chunks of
 * model output (fenced by the lease), and entries appended to a task's log by a command.
 */
import { toChunkRow } from '../rows.ts';
import type { ChunksWrite, NewEvent, RunEventsWrite, StreamChunkRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { LEASED_SQL, statusList } from './sql.ts';
import { FINISHED_STATUSES } from '../lifecycle.ts';

export function appendRunEvents(c: SqliteContext, w: RunEventsWrite): boolean {
  return c.tx(() => {
    const row = c.stmt(`UPDATE stepwise_tasks SET usage = ? WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL}) RETURNING no`).get(w.usage, w.taskId, w.epoch) as Raw | undefined;
    if (!row) return false;
    c.append(Number(row.no), w.at, w.events);
    return true;
  });
}

export function appendChunks(c: SqliteContext, w: ChunksWrite): boolean {
  return c.tx(() => {
    if (!c.stmt(`SELECT 1 FROM stepwise_tasks WHERE id = ? AND epoch = ? AND status IN (${LEASED_SQL})`).get(w.taskId, w.epoch)) return false;
    const insert = c.stmt('INSERT INTO stepwise_stream_chunks (task_id, step, attempt, kind, delta, at) VALUES (?, ?, ?, ?, ?, ?)');
    for (const k of w.chunks) insert.run(w.taskId, k.step, k.attempt, k.kind, k.delta, k.at);
    return true;
  });
}

export function getChunks(c: SqliteContext, taskId: string, after: number, limit: number): StreamChunkRow[] {
  return c.translate(() => (c.stmt('SELECT * FROM stepwise_stream_chunks WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?').all(taskId, after, limit) as Raw[]).map(toChunkRow));
}

export function deleteChunks(c: SqliteContext, taskId: string, step: string): void {
  c.translate(() => c.stmt('DELETE FROM stepwise_stream_chunks WHERE task_id = ? AND step = ?').run(taskId, step));
}

export function purgeChunks(c: SqliteContext, endedBefore: number, limit: number): number {
  return c.tx(
    () =>
      c
        .stmt(
          `DELETE FROM stepwise_stream_chunks WHERE id IN (
             SELECT k.id FROM stepwise_stream_chunks k JOIN stepwise_tasks t ON t.id = k.task_id
             WHERE t.status IN (${statusList(FINISHED_STATUSES)}) AND t.finished_at <= ? LIMIT ?)`,
        )
        .run(endedBefore, limit).changes,
  );
}

export function appendTaskEvents(c: SqliteContext, taskId: string, at: number, entries: readonly NewEvent[]): boolean {
  return c.tx(() => {
    const no = c.noNow(taskId);
    if (no === undefined) return false;
    c.append(no, at, entries);
    return true;
  });
}
