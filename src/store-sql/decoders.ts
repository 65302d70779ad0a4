/**
 * @module store-sql/decoders
 * Internal: not part of the public API.
 * Rows of the tables whose decoding both stores share: schedules and deletion records. The
 * drivers differ only in types (SQLite hands back booleans as 0/1; PostgreSQL bigints may come
 * back as strings), which the decoders accept both of.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { DeletionRecord, ScheduleRow } from '../store.ts';

type Raw = Record<string, unknown>;

const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/** The schedule table's columns, in the order both stores select them. */
export const SCHEDULE_COLUMNS = 'id, workflow, cron, timezone, input, overlap, catchup_ms, paused, next_at, last_at, last_task_id, buffered_at, skipped, source, created_at, updated_at';

export function toScheduleRow(r: Raw): ScheduleRow {
  return {
    id: String(r.id),
    workflow: String(r.workflow),
    cron: String(r.cron),
    timezone: strOrNull(r.timezone),
    input: strOrNull(r.input),
    overlap: String(r.overlap) as ScheduleRow['overlap'],
    catchupMs: Number(r.catchup_ms),
    paused: r.paused === true || Number(r.paused) === 1,
    nextAt: numOrNull(r.next_at),
    lastAt: numOrNull(r.last_at),
    lastTaskId: strOrNull(r.last_task_id),
    bufferedAt: numOrNull(r.buffered_at),
    skipped: Number(r.skipped),
    source: String(r.source) as ScheduleRow['source'],
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/** A row of the deletions table (`task_id, workflow, status, reason, actor_kind, actor_id, at`). */
export function toDeletionRecord(r: Raw): DeletionRecord {
  return {
    id: String(r.task_id),
    workflow: String(r.workflow),
    status: r.status as TaskStatus,
    reason: r.reason as DeletionRecord['reason'],
    by: { kind: r.actor_kind as DeletionRecord['by']['kind'], id: String(r.actor_id) },
    at: Number(r.at),
  };
}
