/**
 * @module rows
 * Internal: not part of the public API (the package exports only its index modules).
 * Mapping between database rows (snake_case columns, integers that some drivers hand back as
 * strings) and the Store's row types: the journal's columns, log and signal rows here, the task
 * row's in `task-columns.ts`. Shared by the SQLite and PostgreSQL stores so that both read and
 * write the same shape.
 */
import type { ActorKind, AlertRow, EventRow, SignalRow, StepRow, StreamChunkRow } from './store.ts';
export { decodeEvents, encodeEvents, patchAssignments, toTaskRow } from './task-columns.ts';

type Raw = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

export function toStepRow(r: Raw): StepRow {
  return {
    taskId: String(r.task_id),
    seq: num(r.seq),
    name: String(r.name),
    kind: r.kind as StepRow['kind'],
    status: r.status as StepRow['status'],
    output: strOrNull(r.output),
    error: strOrNull(r.error),
    attempts: num(r.attempts),
    startedAt: numOrNull(r.started_at),
    finishedAt: numOrNull(r.finished_at),
    wakeAt: numOrNull(r.wake_at),
    epoch: num(r.epoch),
    done: numOrNull(r.done),
    calledAfter: numOrNull(r.called_after),
    businessKey: strOrNull(r.business_key),
  };
}

export function toEventRow(r: Raw): EventRow {
  return {
    taskId: String(r.task_id),
    seq: num(r.seq),
    at: num(r.at),
    type: String(r.type),
    actorKind: r.actor_kind as ActorKind,
    actorId: String(r.actor_id),
    data: strOrNull(r.data),
  };
}

export function toSignalRow(r: Raw): SignalRow {
  return {
    id: num(r.id),
    taskId: String(r.task_id),
    name: String(r.name),
    payload: strOrNull(r.payload),
    idempotencyKey: strOrNull(r.idempotency_key),
    createdAt: num(r.created_at),
    consumedSeq: numOrNull(r.consumed_seq),
  };
}

/** The step row's values in the column order of {@link STEP_COLUMNS}. */
export const STEP_COLUMNS = [
  'task_id',
  'seq',
  'name',
  'kind',
  'status',
  'output',
  'error',
  'attempts',
  'started_at',
  'finished_at',
  'wake_at',
  'epoch',
  'done',
  'called_after',
  'business_key',
] as const;

/** The step rows' values as one array per column, in the order of {@link STEP_COLUMNS} (for `unnest`). */
export function stepColumnArrays(rows: readonly StepRow[]): unknown[][] {
  const n = rows.length;
  const cols: unknown[][] = STEP_COLUMNS.map(() => new Array<unknown>(n));
  const [taskId, seq, name, kind, status, output, error, attempts, startedAt, finishedAt, wakeAt, epoch, done, calledAfter, businessKey] = cols as [
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
    unknown[],
  ];
  for (let r = 0; r < n; r++) {
    const s = rows[r] as StepRow;
    taskId[r] = s.taskId;
    seq[r] = s.seq;
    name[r] = s.name;
    kind[r] = s.kind;
    status[r] = s.status;
    output[r] = s.output;
    error[r] = s.error;
    attempts[r] = s.attempts;
    startedAt[r] = s.startedAt;
    finishedAt[r] = s.finishedAt;
    wakeAt[r] = s.wakeAt;
    epoch[r] = s.epoch;
    done[r] = s.done;
    calledAfter[r] = s.calledAfter;
    businessKey[r] = s.businessKey;
  }
  return cols;
}

/** {@link stepValues} without the task id (the SQLite journal refers to its task by its key). */
export function stepValuesOfTask(s: StepRow): unknown[] {
  return [s.seq, s.name, s.kind, s.status, s.output, s.error, s.attempts, s.startedAt, s.finishedAt, s.wakeAt, s.epoch, s.done, s.calledAfter, s.businessKey];
}

export function stepValues(s: StepRow): unknown[] {
  return [s.taskId, s.seq, s.name, s.kind, s.status, s.output, s.error, s.attempts, s.startedAt, s.finishedAt, s.wakeAt, s.epoch, s.done, s.calledAfter, s.businessKey];
}

export function isRaw(v: unknown): v is { raw: string } {
  return typeof v === 'object' && v !== null && 'raw' in v;
}

/** A stream chunk from a database row. */
export function toChunkRow(r: Raw): StreamChunkRow {
  return {
    id: Number(r.id),
    taskId: String(r.task_id),
    step: String(r.step),
    attempt: Number(r.attempt),
    kind: r.kind === 'reset' ? 'reset' : 'delta',
    delta: String(r.delta),
    at: Number(r.at),
  };
}

export function toAlertRow(r: Raw): AlertRow {
  return {
    id: r.id as string,
    kind: r.kind as string,
    subject: r.subject as string,
    workflow: (r.workflow as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    message: r.message as string,
    data: r.data as string,
    raisedAt: Number(r.raised_at),
    raisedBy: r.raised_by as string,
    dedupe: r.dedupe as string,
  };
}
