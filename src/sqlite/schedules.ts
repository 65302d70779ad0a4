/**
 * @module sqlite/schedules
 * Internal: not part of the public API.
 * Schedules on SQLite: the rows, and the compare-and-set that moves a schedule's next tick.
 */
import type { ScheduleAdvance, ScheduleDefinition, ScheduleRow } from '../store.ts';
import { SCHEDULE_COLUMNS, toScheduleRow } from '../store-sql/decoders.ts';
import type { Raw, SqliteContext } from './context.ts';

const COLUMNS = SCHEDULE_COLUMNS;
const toRow = toScheduleRow;

export function getSchedule(c: SqliteContext, id: string): ScheduleRow | null {
  const r = c.stmt(`SELECT ${COLUMNS} FROM stepwise_schedules WHERE id = ?`).get(id) as Raw | undefined;
  return r ? toRow(r) : null;
}

export function putSchedule(c: SqliteContext, d: ScheduleDefinition, nextAt: number | null, at: number): { row: ScheduleRow; created: boolean } {
  return c.tx(() => {
    const created = getSchedule(c, d.id) === null;
    c.stmt(
      `INSERT INTO stepwise_schedules (id, workflow, cron, timezone, input, overlap, catchup_ms, next_at, source, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
         overlap = excluded.overlap, catchup_ms = excluded.catchup_ms, next_at = excluded.next_at, source = excluded.source, updated_at = excluded.updated_at`,
    ).run(d.id, d.workflow, d.cron, d.timezone, d.input, d.overlap, d.catchupMs, nextAt, d.source, at, at);
    return { row: getSchedule(c, d.id) as ScheduleRow, created };
  });
}

export function listSchedules(c: SqliteContext, q: { after?: string; limit: number; workflow?: string }): ScheduleRow[] {
  const rows = c
    .stmt(`SELECT ${COLUMNS} FROM stepwise_schedules WHERE id > ? AND (? IS NULL OR workflow = ?) ORDER BY id LIMIT ?`)
    .all(q.after ?? '', q.workflow ?? null, q.workflow ?? null, q.limit) as Raw[];
  return rows.map(toRow);
}

export function dueSchedules(c: SqliteContext, now: number, limit: number): ScheduleRow[] {
  const rows = c.stmt(`SELECT ${COLUMNS} FROM stepwise_schedules WHERE paused = 0 AND (next_at <= ? OR buffered_at IS NOT NULL) ORDER BY next_at LIMIT ?`).all(now, limit) as Raw[];
  return rows.map(toRow);
}

export function advanceSchedule(c: SqliteContext, a: ScheduleAdvance): boolean {
  return c.tx(
    () =>
      c
        .stmt(
          `UPDATE stepwise_schedules SET next_at = ?, last_at = COALESCE(?, last_at), last_task_id = COALESCE(?, last_task_id),
             buffered_at = CASE WHEN ? THEN ? ELSE buffered_at END, skipped = skipped + ?, updated_at = ?
           WHERE id = ? AND next_at IS ? AND paused = 0`,
        )
        .run(a.nextAt, a.lastAt ?? null, a.lastTaskId ?? null, a.bufferedAt !== undefined ? 1 : 0, a.bufferedAt ?? null, a.skipped ?? 0, a.at, a.id, a.from).changes === 1,
  );
}

export function setSchedulePaused(c: SqliteContext, id: string, paused: boolean, nextAt: number | null, at: number): ScheduleRow | null {
  return c.tx(() => {
    const changed = paused
      ? c.stmt('UPDATE stepwise_schedules SET paused = 1, updated_at = ? WHERE id = ?').run(at, id).changes
      : c.stmt('UPDATE stepwise_schedules SET paused = 0, next_at = CASE WHEN paused = 1 THEN ? ELSE next_at END, updated_at = ? WHERE id = ?').run(nextAt, at, id).changes;
    return changed ? getSchedule(c, id) : null;
  });
}

export function deleteSchedule(c: SqliteContext, id: string): boolean {
  return c.tx(() => c.stmt('DELETE FROM stepwise_schedules WHERE id = ?').run(id).changes === 1);
}

export function nextScheduleAt(c: SqliteContext): number | null {
  const r = c.stmt('SELECT MIN(next_at) AS n FROM stepwise_schedules WHERE paused = 0').get() as Raw;
  return r.n === null || r.n === undefined ? null : Number(r.n);
}
