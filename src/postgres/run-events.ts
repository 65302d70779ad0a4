/**
 * @module postgres/run-events
 * Internal: not part of the public API.
 * What a run writes beside its journal: log entries (model usage of an attempt) with the task's
 * usage column, in one statement fenced by the run's epoch on the task row, which it locks before
 * taking the entries' numbers from the task's head (see heads.ts: numbered without gaps, as for a checkpoint); and the chunks of a streaming step.
 */
import { poolOf, query, rows, run, type PgContext } from './connection.ts';
import { LEASED_SQL, Params, sqlStatuses } from './sql-text.ts';
import { FINISHED_STATUSES } from '../lifecycle.ts';
import { appendSql } from './transition.ts';
import { toChunkRow } from '../rows.ts';
import type { ChunksWrite, LogPosition, RunEventsWrite, StreamChunkRow } from '../store.ts';

export async function appendRunEvents(c: PgContext, w: RunEventsWrite): Promise<boolean> {
  return run(c, async () => {
    const p = new Params();
    const id = p.add(w.taskId, 'text');
    const epoch = p.add(w.epoch, 'integer');
    const n = w.events.length;
    const usage = p.add(w.usage, 'text');
    const at = p.add(w.at, 'bigint');
    // The task row (its usage) is locked and fenced before the head, in the heads' lock order.
    const sql = `WITH k AS (
        UPDATE ${c.t.tasks} SET usage = ${usage} WHERE id = ${id} AND epoch = ${epoch} AND (status IN (${LEASED_SQL})) IS TRUE RETURNING id
      ), f AS (
        UPDATE ${c.t.heads} SET event_seq = event_seq + ${n} WHERE id = (SELECT id FROM k) RETURNING event_seq
      ), log AS (${appendSql(c.t, p, 'f', id, `f.event_seq - ${n}`, at, w.events)}
      )
      SELECT 1 FROM f`;
    return (await rows(c, poolOf(c), sql, p.values)).length === 1;
  });
}

/** Chunks of a streaming step, only while the task is leased at `epoch`. */
export async function appendChunks(c: PgContext, w: ChunksWrite): Promise<boolean> {
  if (!w.chunks.length) return true;
  return run(c, async () => {
    const done = await rows(
      c,
      poolOf(c),
      `INSERT INTO ${c.t.chunks} (task_id, step, attempt, kind, delta, at)
       SELECT $1, x.step, x.attempt, x.kind, x.delta, x.at
       FROM unnest($3::text[], $4::integer[], $5::text[], $6::text[], $7::bigint[]) WITH ORDINALITY AS x(step, attempt, kind, delta, at, n)
       WHERE EXISTS (SELECT 1 FROM ${c.t.tasks} WHERE id = $1 AND epoch = $2 AND (status IN (${LEASED_SQL})) IS TRUE)
       ORDER BY x.n
       RETURNING 1`,
      [w.taskId, w.epoch, w.chunks.map((x) => x.step), w.chunks.map((x) => x.attempt), w.chunks.map((x) => x.kind), w.chunks.map((x) => x.delta), w.chunks.map((x) => x.at)],
    );
    return done.length > 0;
  });
}

export async function getChunks(c: PgContext, taskId: string, after: number, limit: number): Promise<StreamChunkRow[]> {
  return run(c, async () => (await rows(c, poolOf(c), `SELECT * FROM ${c.t.chunks} WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`, [taskId, after, limit])).map(toChunkRow));
}

/** Each task's last log seq and last stream frame id, in one indexed read (see `LogStore.logPositions`). */
export async function logPositions(c: PgContext, taskIds: readonly string[]): Promise<LogPosition[]> {
  return run(c, async () =>
    (
      await rows(
        c,
        poolOf(c),
        `SELECT t.id, t.event_seq, coalesce((SELECT max(k.id) FROM ${c.t.chunks} k WHERE k.task_id = t.id), 0) AS frame FROM ${c.t.heads} t WHERE t.id = ANY($1::text[])`,
        [taskIds],
      )
    ).map((r) => ({ taskId: String(r.id), seq: Number(r.event_seq), frame: Number(r.frame) })),
  );
}

export async function deleteChunks(c: PgContext, taskId: string, step: string): Promise<void> {
  await run(c, async () => rows(c, poolOf(c), `DELETE FROM ${c.t.chunks} WHERE task_id = $1 AND step = $2`, [taskId, step]));
}

export async function purgeChunks(c: PgContext, endedBefore: number, limit: number): Promise<number> {
  return run(c, async () => {
    const r = await query(
      c,
      poolOf(c),
      `DELETE FROM ${c.t.chunks} WHERE id IN (
         SELECT k.id FROM ${c.t.chunks} k JOIN ${c.t.tasks} t ON t.id = k.task_id
         WHERE t.status IN (${sqlStatuses(FINISHED_STATUSES)}) AND t.finished_at <= $1 LIMIT $2)`,
      [endedBefore, limit],
    );
    return r.rowCount ?? 0;
  });
}
