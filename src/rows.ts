/**
 * @module rows
 * Internal: not part of the public API (the package exports only its index modules).
 * Mapping between database rows (snake_case columns, integers that some drivers hand back as
 * strings) and the Store's row types, plus the column list a {@link TaskPatch} writes. Shared by the
 * SQLite and PostgreSQL stores so that both read and write the same shape.
 */
import type { ActorKind, EventRow, SignalRow, StepRow, TaskPatch, TaskRow } from './store.ts';
import type { TaskStatus } from './lifecycle.ts';

type Raw = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

export function toTaskRow(r: Raw): TaskRow {
  return {
    id: String(r.id),
    workflow: String(r.workflow),
    workflowVersion: String(r.workflow_version),
    status: r.status as TaskStatus,
    input: strOrNull(r.input),
    output: strOrNull(r.output),
    error: strOrNull(r.error),
    idempotencyKey: strOrNull(r.idempotency_key),
    runAt: numOrNull(r.run_at),
    leaseOwner: strOrNull(r.lease_owner),
    leaseExpiresAt: numOrNull(r.lease_expires_at),
    epoch: num(r.epoch),
    version: num(r.version),
    runs: num(r.runs),
    retries: num(r.retries),
    pauseRequested: r.pause_requested === true || num(r.pause_requested) === 1,
    wait: strOrNull(r.wait),
    waitEvents: decodeEvents(strOrNull(r.wait_events)),
    cancelReason: strOrNull(r.cancel_reason),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
    finishedAt: numOrNull(r.finished_at),
  };
}

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
  'task_id', 'seq', 'name', 'kind', 'status', 'output', 'error',
  'attempts', 'started_at', 'finished_at', 'wake_at', 'epoch', 'done', 'called_after',
] as const;

export function stepValues(s: StepRow): unknown[] {
  return [s.taskId, s.seq, s.name, s.kind, s.status, s.output, s.error, s.attempts, s.startedAt, s.finishedAt, s.wakeAt, s.epoch, s.done, s.calledAfter];
}

/**
 * Column assignments for a patch: `[column, value]` pairs, where a value of `{ raw }` is SQL text
 * (dialect-neutral) rather than a parameter.
 */
export function patchAssignments(patch: TaskPatch, toBool: (b: boolean) => unknown): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  if ('output' in patch) out.push(['output', patch.output]);
  if ('error' in patch) out.push(['error', patch.error]);
  if ('runAt' in patch) out.push(['run_at', patch.runAt]);
  if (patch.clearLease) {
    out.push(['lease_owner', null]);
    out.push(['lease_expires_at', null]);
  }
  if (patch.pauseRequested !== undefined) out.push(['pause_requested', toBool(patch.pauseRequested)]);
  if ('wait' in patch) out.push(['wait', patch.wait]);
  if ('waitEvents' in patch) out.push(['wait_events', encodeEvents(patch.waitEvents ?? null)]);
  if ('cancelReason' in patch) out.push(['cancel_reason', patch.cancelReason]);
  if ('finishedAt' in patch) out.push(['finished_at', patch.finishedAt]);
  if (patch.incrementRetries) out.push(['retries', { raw: 'retries + 1' }]);
  return out;
}

export function isRaw(v: unknown): v is { raw: string } {
  return typeof v === 'object' && v !== null && 'raw' in v;
}

/** Awaited events as stored: `|approve|reject|` (names may not contain `|`), or NULL. */
export function encodeEvents(events: readonly string[] | null): string | null {
  return events && events.length ? `|${events.join('|')}|` : null;
}

export function decodeEvents(text: string | null): string[] | null {
  return text ? text.split('|').filter(Boolean) : null;
}
