/**
 * @module task-columns
 * Internal: not part of the public API (the package exports only its index modules).
 *
 * The one table of the task row's columns: for each field of {@link TaskRow}, its column, its SQL
 * type on PostgreSQL, how a driver's value is read back, and whether a transition may set it (a
 * {@link TaskPatch} field). Row mapping (`rows.ts`), patch assignments (both stores), the
 * PostgreSQL parameter types and the batched transition statement (`postgres/transition-batch-sql.ts`) are
 * generated from it: a new column is one entry here plus its migrations.
 */
import type { TaskStatus } from './lifecycle.ts';
import type { TaskEnd, TaskHead, TaskPatch, TaskRow } from './store.ts';

type Raw = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const bool = (v: unknown): boolean => v === true || num(v) === 1;

/** Awaited events as stored: `|approve|reject|` (names may not contain `|`), or NULL. */
export function encodeEvents(events: readonly string[] | null): string | null {
  return events && events.length ? `|${events.join('|')}|` : null;
}

export function decodeEvents(text: string | null): string[] | null {
  return text ? text.split('|').filter(Boolean) : null;
}

/** A column a transition may set: the patch field of the same name writes it. */
interface Settable {
  /** The value to bind for the patch field's value (booleans are bound by each store). */
  readonly encode?: (value: never) => unknown;
}

export interface TaskColumn {
  readonly field: keyof TaskRow;
  readonly column: string;
  /** The column's type on PostgreSQL (for typed parameters and `unnest` arrays). */
  readonly pg: 'text' | 'bigint' | 'integer' | 'boolean';
  /** Reads a driver's value (SQLite gives integers for booleans; pg gives some integers as strings). */
  readonly decode: (value: unknown) => unknown;
  /** Present when a {@link TaskPatch} field of the same name writes the column. */
  readonly patch?: Settable;
}

const c = (field: keyof TaskRow, column: string, pg: TaskColumn['pg'], decode: (v: unknown) => unknown, patch?: Settable): TaskColumn =>
  patch ? { field, column, pg, decode, patch } : { field, column, pg, decode };

/** Every column of the task row, in the order of the schema. */
export const TASK_COLUMNS: readonly TaskColumn[] = Object.freeze([
  c('id', 'id', 'text', String),
  c('workflow', 'workflow', 'text', String),
  c('workflowVersion', 'workflow_version', 'text', String),
  c('status', 'status', 'text', (v) => v as TaskStatus),
  c('input', 'input', 'text', strOrNull),
  c('output', 'output', 'text', strOrNull, {}),
  c('error', 'error', 'text', strOrNull, {}),
  c('idempotencyKey', 'idempotency_key', 'text', strOrNull),
  c('runAt', 'run_at', 'bigint', numOrNull, {}),
  c('leaseOwner', 'lease_owner', 'text', strOrNull),
  c('leaseExpiresAt', 'lease_expires_at', 'bigint', numOrNull),
  c('epoch', 'epoch', 'integer', num),
  c('version', 'version', 'integer', num),
  c('runs', 'runs', 'integer', num),
  c('retries', 'retries', 'integer', num),
  c('pauseRequested', 'pause_requested', 'boolean', bool, {}),
  c('wait', 'wait', 'text', strOrNull, {}),
  c('waitEvents', 'wait_events', 'text', (v) => decodeEvents(strOrNull(v)), { encode: (events: readonly string[] | null) => encodeEvents(events ?? null) }),
  c('cancelReason', 'cancel_reason', 'text', strOrNull, {}),
  c('createdAt', 'created_at', 'bigint', num),
  c('updatedAt', 'updated_at', 'bigint', num),
  c('finishedAt', 'finished_at', 'bigint', numOrNull, {}),
  c('progress', 'progress', 'text', strOrNull),
  c('usage', 'usage', 'text', strOrNull),
  c('deadlineAt', 'deadline_at', 'bigint', numOrNull, {}),
  c('hasCleanup', 'has_cleanup', 'boolean', bool, {}),
  c('redo', 'redo', 'text', strOrNull, {}),
  c('title', 'title', 'text', strOrNull),
  c('debounceKey', 'debounce_key', 'text', strOrNull),
  c('singletonKey', 'singleton_key', 'text', strOrNull),
  c('concurrencyKey', 'concurrency_key', 'text', strOrNull),
  c('concurrencyLimit', 'concurrency_limit', 'integer', numOrNull),
  c('priority', 'priority', 'integer', (v) => (v === null || v === undefined ? 0 : num(v))),
  c('heldByKey', 'held_by_key', 'boolean', bool),
  c('parentId', 'parent_id', 'text', strOrNull),
  c('rootId', 'root_id', 'text', strOrNull),
  c('depth', 'depth', 'integer', num),
  c('tags', 'tags', 'text', strOrNull),
  c('forkedFrom', 'forked_from', 'text', strOrNull),
  c('undoFrom', 'undo_from', 'integer', numOrNull, {}),
]);

/** The columns a patch field writes directly (`clearLease`, `expireLease`, `incrementRetries` and `incrementEpoch` are derived below). */
export const PATCH_COLUMNS: readonly TaskColumn[] = Object.freeze(TASK_COLUMNS.filter((col) => col.patch));

/**
 * A task row from a database row: one object literal of every field, generated once from
 * {@link TASK_COLUMNS} (a task row is decoded at every claim and every end of a run, and a literal
 * of known shape costs far less than a loop that adds fields one by one).
 */
export const toTaskRow: (r: Raw) => TaskRow = compileDecoder(TASK_COLUMNS);

function compileDecoder(columns: readonly TaskColumn[]): (r: Raw) => TaskRow {
  const fields = columns.map((col, i) => `${JSON.stringify(col.field)}: d[${i}](r[${JSON.stringify(col.column)}])`);
  try {
    // The function's text is built from the constant column table above, never from data.
    const make = new Function('d', `return function toTaskRow(r) { return { ${fields.join(', ')} }; };`) as (d: ReadonlyArray<(v: unknown) => unknown>) => (r: Raw) => TaskRow;
    return make(columns.map((col) => col.decode));
  } catch {
    // A process that forbids code generation from strings (--disallow-code-generation-from-strings).
    return (r) => {
      const row: Record<string, unknown> = {};
      for (const col of columns) row[col.field] = col.decode(r[col.column]);
      return row as unknown as TaskRow;
    };
  }
}

/** The columns of a {@link TaskHead}, as SQL of the alias `t` (a transition batch's answer when every op asks for heads). */
export const HEAD_SQL = (t: string): string => `${t}.id, ${t}.workflow, ${t}.status, ${t}.epoch, ${t}.lease_owner, ${t}.run_at, ${t}.updated_at`;

/** A task's head from a database row of {@link HEAD_SQL}'s columns. */
export function toTaskHead(r: Raw): TaskHead {
  return {
    id: String(r.id),
    workflow: String(r.workflow),
    status: r.status as TaskStatus,
    epoch: num(r.epoch),
    leaseOwner: strOrNull(r.lease_owner),
    runAt: numOrNull(r.run_at),
    updatedAt: num(r.updated_at),
    head: true,
  };
}

/** The columns of a {@link TaskEnd}, as SQL of the alias `t`: the head's and the outcome's. */
export const END_SQL = (t: string): string => `${HEAD_SQL(t)}, ${t}.output, ${t}.error, ${t}.cancel_reason`;

/** A task's end from a database row of {@link END_SQL}'s columns. */
export function toTaskEnd(r: Raw): TaskEnd {
  return { ...toTaskHead(r), output: strOrNull(r.output), error: strOrNull(r.error), cancelReason: strOrNull(r.cancel_reason), end: true };
}

/** The value a patch binds for `col` (booleans stay booleans here; each store binds its own). */
export function patchValue(col: TaskColumn, patch: TaskPatch): unknown {
  const value = (patch as Record<string, unknown>)[col.field];
  return col.patch?.encode ? (col.patch.encode as (v: unknown) => unknown)(value) : value;
}

/**
 * Column assignments for a patch: `[column, value]` pairs, where a value of `{ raw }` is SQL text
 * rather than a parameter. Absent fields are left alone; `clearLease` clears the lease owner and
 * expiry; `expireLease` clears the owner and sets the expiry to `now` (the store's current time: a
 * value, or `{ raw }` SQL); `incrementRetries` adds one to `retries`, `incrementEpoch` to `epoch`.
 */
export function patchAssignments(patch: TaskPatch, toBool: (b: boolean) => unknown, now: unknown): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const col of PATCH_COLUMNS) {
    if (!(col.field in patch) || (patch as Record<string, unknown>)[col.field] === undefined) continue;
    const value = patchValue(col, patch);
    out.push([col.column, col.pg === 'boolean' ? toBool(value as boolean) : value]);
  }
  if (patch.clearLease) {
    out.push(['lease_owner', null]);
    out.push(['lease_expires_at', null]);
  } else if (patch.expireLease) {
    out.push(['lease_owner', null]);
    out.push(['lease_expires_at', now]);
  }
  if (patch.incrementRetries) out.push(['retries', { raw: 'retries + 1' }]);
  if (patch.incrementEpoch) out.push(['epoch', { raw: 'epoch + 1' }]);
  return out;
}

/** SQL types on PostgreSQL of the columns a patch may write. */
export const PATCH_TYPES: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries([...PATCH_COLUMNS.map((col) => [col.column, col.pg]), ['lease_owner', 'text'], ['lease_expires_at', 'bigint']]),
);
