/**
 * @module postgres/schedules
 * Internal: not part of the public API.
 * Schedules on PostgreSQL: the rows, and the compare-and-set that moves a schedule's next tick
 * (one statement: of processes racing for one tick, one moves it).
 */
import type { ScheduleAdvance, ScheduleDefinition, ScheduleRow } from '../store.ts';
import { SCHEDULE_COLUMNS, toScheduleRow } from '../store-sql/decoders.ts';
import { poolOf, rows, run, type PgContext, type Raw } from './connection.ts';

const COLUMNS = SCHEDULE_COLUMNS;
const toRow = toScheduleRow;

const table = (c: PgContext): string => `"${c.schema.replaceAll('"', '""')}".schedules`;

export async function getSchedule(c: PgContext, id: string): Promise<ScheduleRow | null> {
  const [r] = await run(c, () => rows(c, poolOf(c), `SELECT ${COLUMNS} FROM ${table(c)} WHERE id = $1`, [id]));
  return r ? toRow(r) : null;
}

export async function putSchedule(c: PgContext, d: ScheduleDefinition, nextAt: number | null, at: number): Promise<{ row: ScheduleRow; created: boolean }> {
  // xmax = 0: the row was inserted by this statement, not updated.
  const [r] = await run(c, () =>
    rows(
      c,
      poolOf(c),
      `INSERT INTO ${table(c)} (id, workflow, cron, timezone, input, overlap, catchup_ms, next_at, source, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
       ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
         overlap = excluded.overlap, catchup_ms = excluded.catchup_ms, next_at = excluded.next_at, source = excluded.source, updated_at = excluded.updated_at
       RETURNING ${COLUMNS}, (xmax = 0) AS created`,
      [d.id, d.workflow, d.cron, d.timezone, d.input, d.overlap, d.catchupMs, nextAt, d.source, at],
    ),
  );
  return { row: toRow(r as Raw), created: (r as Raw).created === true };
}

export async function listSchedules(c: PgContext, q: { after?: string; limit: number; workflow?: string }): Promise<ScheduleRow[]> {
  const found = await run(c, () =>
    rows(c, poolOf(c), `SELECT ${COLUMNS} FROM ${table(c)} WHERE id COLLATE "C" > $1 AND ($2::text IS NULL OR workflow = $2) ORDER BY id COLLATE "C" LIMIT $3`, [
      q.after ?? '',
      q.workflow ?? null,
      q.limit,
    ]),
  );
  return found.map(toRow);
}

export async function dueSchedules(c: PgContext, now: number, limit: number): Promise<ScheduleRow[]> {
  const found = await run(c, () =>
    rows(c, poolOf(c), `SELECT ${COLUMNS} FROM ${table(c)} WHERE NOT paused AND (next_at <= $1 OR buffered_at IS NOT NULL) ORDER BY next_at LIMIT $2`, [now, limit]),
  );
  return found.map(toRow);
}

export async function advanceSchedule(c: PgContext, a: ScheduleAdvance): Promise<boolean> {
  const changed = await run(c, () =>
    rows(
      c,
      poolOf(c),
      `UPDATE ${table(c)} SET next_at = $1, last_at = COALESCE($2, last_at), last_task_id = COALESCE($3, last_task_id),
         buffered_at = CASE WHEN $4::boolean THEN $5::bigint ELSE buffered_at END, skipped = skipped + $6, updated_at = $7
       WHERE id = $8 AND next_at IS NOT DISTINCT FROM $9::bigint AND NOT paused RETURNING id`,
      [a.nextAt, a.lastAt ?? null, a.lastTaskId ?? null, a.bufferedAt !== undefined, a.bufferedAt ?? null, a.skipped ?? 0, a.at, a.id, a.from],
    ),
  );
  return changed.length === 1;
}

export async function setSchedulePaused(c: PgContext, id: string, paused: boolean, nextAt: number | null, at: number): Promise<ScheduleRow | null> {
  const [r] = await run(c, () =>
    paused
      ? rows(c, poolOf(c), `UPDATE ${table(c)} SET paused = true, updated_at = $1 WHERE id = $2 RETURNING ${COLUMNS}`, [at, id])
      : rows(c, poolOf(c), `UPDATE ${table(c)} SET paused = false, next_at = CASE WHEN paused THEN $1::bigint ELSE next_at END, updated_at = $2 WHERE id = $3 RETURNING ${COLUMNS}`, [
          nextAt,
          at,
          id,
        ]),
  );
  return r ? toRow(r) : null;
}

export async function deleteSchedule(c: PgContext, id: string): Promise<boolean> {
  return (await run(c, () => rows(c, poolOf(c), `DELETE FROM ${table(c)} WHERE id = $1 RETURNING id`, [id]))).length === 1;
}

export async function nextScheduleAt(c: PgContext): Promise<number | null> {
  const [r] = await run(c, () => rows(c, poolOf(c), `SELECT MIN(next_at) AS n FROM ${table(c)} WHERE NOT paused`));
  return r?.n === null || r?.n === undefined ? null : Number(r.n);
}
