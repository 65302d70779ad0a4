/**
 * @module postgres/sql-text
 * Internal: not part of the public API (the package exports only its index modules).
 * Building blocks of the PostgreSQL store's statements: typed positional parameters, status
 * literals, column types, and the quoted table names of one schema.
 */
import { LEASED_STATUSES } from '../lifecycle.ts';
import { STEP_COLUMNS, isRaw, patchAssignments } from '../rows.ts';
import { PATCH_TYPES } from '../task-columns.ts';
import type { ClaimRequest, TaskPatch } from '../store.ts';
import { quoteIdent } from './migrate.ts';
import { servedSet } from '../claim-plan.ts';
import { appendFence, idOrderSql } from './heads.ts';
import { statusLiterals } from '../store-sql/filters.ts';
import type { SqlParams } from '../store-sql/params.ts';

/**
 * Task statuses as SQL literals (see `store-sql/filters.ts`): literals, rather than parameters, let
 * the planner match the partial indexes.
 */
export const sqlStatuses = statusLiterals;

export const LEASED_SQL = sqlStatuses(LEASED_STATUSES);

/**
 * The database's clock in milliseconds since the epoch. Leases are judged by it alone (their
 * expiry is written and compared in this clock), so that workers whose clocks disagree agree on
 * whose lease is live; the caller's `now` dates log entries and decides when scheduled work is due.
 *
 * A scalar subquery, read once per statement: `clock_timestamp()` alone is volatile, so a
 * comparison with it could not bound an index scan, and finding expired leases (`lease_expires_at
 * <= now`, which every claim asks) would read the whole lease index, every live lease of every
 * worker, on each poll.
 */
export const DB_NOW_MS = '(SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint)';

/** SQL types of {@link STEP_COLUMNS}, in order. */
export const STEP_TYPES = ['text', 'integer', 'text', 'text', 'text', 'text', 'text', 'integer', 'bigint', 'bigint', 'bigint', 'integer', 'integer', 'integer', 'text'] as const;

export const STEP_UPSERT_SET = STEP_COLUMNS.slice(2)
  .map((c) => `${c} = excluded.${c}`)
  .join(', ');
/** The same for a write that also sets the row's `log_seq` (the entry it carries, or NULL). */
export const STEP_UPSERT_LOGGED_SET = `${STEP_UPSERT_SET}, log_seq = excluded.log_seq`;
/** Whether a journal row of status `status` (SQL) carries its log entry (see `journalCarries`). */
export const carriesSql = (status: string): string => `${status} IN ('completed', 'failed')`;

/**
 * How a checkpoint's statement meets a row already at its position: `fresh`, none is looked for
 * (see {@link upsertClause}); `upsert`, it replaces it; `again`, a row identical to the write is
 * taken as the write itself, committed by an earlier attempt whose answer was lost
 * (`StepWrite.again`): the statement then writes nothing and still answers accepted.
 */
export type StepShape = 'fresh' | 'upsert' | 'again';

/**
 * The fenced checkpoint of one plain step and its log entry: parameters are the step's columns
 * (in {@link STEP_COLUMNS} order), then the task id, the writer's epoch, and the entry's time,
 * type and data. Accepted (one row) only while the task is leased at that epoch
 * ({@link appendFence}, which also numbers the entry). A step's result is carried by its row
 * (`log_seq`, one row written); a wait or a retry due also gets a row of its own in `events`.
 */
export function plainStepSql(t: Tables, shape: StepShape = 'upsert'): string {
  const n = STEP_COLUMNS.length;
  const values = STEP_TYPES.map((type, i) => `$${i + 1}::${type}`);
  const status = `$${STEP_COLUMNS.indexOf('status') + 1}::text`;
  const task = `$${n + 1}::text`;
  const again = sentAgainCte(t, values, shape === 'again');
  return `WITH ${again.cte}f AS (${appendFence(t, task, `$${n + 2}::integer`, '1', again.unless)}
    ), ins AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
      SELECT ${values.join(', ')}, CASE WHEN ${carriesSql(status)} THEN f.event_seq END FROM f${upsertClause(shape)}
    ), ev AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT ${task}, f.event_seq, $${n + 3}::bigint, $${n + 4}::text, 'worker', coalesce(f.lease_owner, 'unknown'), $${n + 5}::text
      FROM f WHERE NOT ${carriesSql(status)}
    )
    SELECT 1 FROM f${again.unless ? ' UNION ALL SELECT 1 FROM d' : ''}`;
}

/**
 * {@link plainStepSql} for a row that carries its entry (a step's result: the hot path), with
 * only the step's columns, the task id and the epoch as parameters: the fence and the row, and no
 * `events` table in the statement (a relation a statement names is opened and locked on every
 * execution, even for an insert of no rows). Accepted when it reports one row.
 */
export function resultStepSql(t: Tables, shape: StepShape = 'upsert'): string {
  const n = STEP_COLUMNS.length;
  const values = STEP_TYPES.map((type, i) => `$${i + 1}::${type}`);
  const insert = `INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
    SELECT ${values.join(', ')}, f.event_seq FROM f${upsertClause(shape)}`;
  if (shape !== 'again') return `WITH f AS (${appendFence(t, `$${n + 1}::text`, `$${n + 2}::integer`, '1')}) ${insert}`;
  // Sent again: the insert becomes a step of the statement, which answers one row when it wrote or found the row.
  const again = sentAgainCte(t, values, true);
  return `WITH ${again.cte}f AS (${appendFence(t, `$${n + 1}::text`, `$${n + 2}::integer`, '1', again.unless)}), ins AS (${insert})
    SELECT 1 FROM f UNION ALL SELECT 1 FROM d`;
}

/**
 * The journal row at the position of a write whose step columns are `values` (SQL, in
 * {@link STEP_COLUMNS} order), if it is identical to it: the same epoch, status, attempts, output,
 * times and the rest (see {@link StepShape} `again`).
 */
function sameStepSql(t: Tables, values: readonly string[]): string {
  return `SELECT 1 FROM ${t.steps} WHERE task_id = ${values[0]} AND seq = ${values[1]}
      AND (${STEP_COLUMNS.slice(2).join(', ')}) IS NOT DISTINCT FROM (${values.slice(2).join(', ')})`;
}

/**
 * What a checkpoint's statement adds when the write is sent again (`again`): the CTE `d`, first in
 * its `WITH`, that finds a row identical to the write ({@link sameStepSql}), and the name the fence
 * skips on ({@link appendFence} `unless`). Otherwise nothing.
 */
export function sentAgainCte(t: Tables, values: readonly string[], again: boolean): { cte: string; unless: string | undefined } {
  return again ? { cte: `d AS (${sameStepSql(t, values)}), `, unless: 'd' } : { cte: '', unless: undefined };
}

/**
 * How a checkpoint's row meets one already at its position: it replaces it; or, for a position
 * the writer knows to be free (`StepWrite.fresh`), none is looked for: a plain insert skips the
 * conflict machinery (arbiter index, speculative insertion), a tenth of a step's cost. If a row is
 * there after all, the insert fails with a unique violation and the write is made again as
 * `again` (see `postgres/write-batch.ts`).
 */
function upsertClause(shape: StepShape): string {
  return shape === 'fresh'
    ? ''
    : `
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}`;
}

/**
 * The task row of one id, locked: a lookup by primary key whatever the planner believes of the
 * table. The caller's conditions on status and epoch stay outside, checked on the newest version
 * of the row once it is locked (as a condition under the locking clause would be); `OFFSET 0` keeps
 * the planner from pushing them in. Under them, plans picked a scan of the leased-tasks index or a
 * sequential scan joined by hash, at a cost that grew with the table on every write.
 */
export function lockById(t: Tables, id: string, strength: 'UPDATE' | 'NO KEY UPDATE', also?: string): string {
  return `SELECT id, status, epoch, version, pause_requested, lease_owner FROM ${t.tasks} WHERE id = ${id}${also ? ` AND ${also}` : ''} OFFSET 0 FOR ${strength}`;
}

/**
 * Each task named by `ids` (a FROM item with a column `id`; repeats taken once) locked `FOR UPDATE`
 * in id order, one lookup by key each, as every multi-row locker takes its locks: the locked rows.
 */
export function lockEachInIdOrder(t: Tables, ids: string): string {
  return `SELECT k.* FROM ${idOrderSql(ids)} CROSS JOIN LATERAL (${lockById(t, 'o.id', 'UPDATE')}) k`;
}

/**
 * A worker's lease renewal: $1 the new expiry, $2/$3 the held task ids and epochs, $4 the worker.
 * Returns the tasks still held, with what the worker must act on (a pause or cancel request).
 * Rows are locked in id order, like every multi-row writer here, so none of them deadlock.
 * Only rows still held are locked (the owner and epoch test is in the locking query): a task whose
 * run has just parked is due to be claimed, and a claim skips locked rows, so a renewal that locked
 * it while waiting for another row would leave it to the next poll. Every edge out of a leased
 * status clears the owner, so the owner test is enough there; the status test stays outside,
 * because inside it matches the leased-tasks index's predicate and a plan made while no task ran
 * read that whole index once per renewed task.
 */
export function heartbeatSql(t: Tables): string {
  return `WITH l AS (
      SELECT t.id FROM (SELECT * FROM unnest($2::text[], $3::integer[]) AS h(id, epoch) ORDER BY id COLLATE "C") h
      CROSS JOIN LATERAL (${lockById(t, 'h.id', 'NO KEY UPDATE', 'epoch = h.epoch AND lease_owner = $4')}) t
      WHERE t.status IN (${LEASED_SQL})
    )
    UPDATE ${t.tasks} AS t SET lease_expires_at = ${DB_NOW_MS} + $1::bigint FROM l WHERE t.id = l.id
    RETURNING t.id, t.status, t.pause_requested, t.cancel_reason`;
}

/**
 * When the next pending or waiting task of the workflows $2 falls due after $1: the due index in
 * run_at order until a task of one of them. The workflow condition stays outside (`OFFSET 0`):
 * pushed in, it made the planner intersect the due index with the workflow index, which lists
 * every task the workflow ever had.
 */
export function nextDueSql(t: Tables): string {
  return `SELECT run_at FROM (
      SELECT run_at, workflow FROM ${t.tasks} WHERE status IN ('pending', 'waiting') AND run_at > $1::bigint ORDER BY run_at OFFSET 0
    ) due WHERE workflow = ANY($2::text[]) ORDER BY run_at LIMIT 1`;
}

/**
 * Tasks of the workflows $2 holding a live lease at $1, per workflow (for concurrency caps): read
 * from the leased-tasks index, with the workflow condition kept outside for the reason given at
 * {@link nextDueSql}.
 */
export function leasedCountSql(t: Tables): string {
  return `SELECT workflow, count(*)::int AS n FROM (
      SELECT workflow FROM ${t.tasks} WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ${DB_NOW_MS} OFFSET 0
    ) leased WHERE workflow = ANY($1::text[]) GROUP BY workflow`;
}

/** `, col = $n, …` for a patch (booleans as booleans). */
export function assignments(patch: TaskPatch, p: Params): string {
  let sets = '';
  for (const [col, value] of patchAssignments(patch, (b) => b, { raw: DB_NOW_MS })) {
    sets += isRaw(value) ? `, ${col} = ${value.raw}` : `, ${col} = ${p.add(value, PATCH_TYPES[col] ?? 'text')}`;
  }
  return sets;
}

/**
 * The claim and reclaim entries of task `task` (SQL), the only log entries whose JSON is parsed in
 * SQL: they are built by `json_build_object` in the claim statements and hold no user text, while
 * other entries may hold escapes PostgreSQL's `->>` refuses (half of an emoji in an error message).
 * `OFFSET 0` keeps the planner from parsing any other row.
 */
export function claimEntriesSql(t: Tables, task: string): string {
  return `SELECT actor_id, data FROM ${t.events} WHERE task_id = ${task} AND type = 'transition' AND actor_kind = 'worker'
    AND (data LIKE '{"event" : "claim",%' OR data LIKE '{"event" : "reclaim",%') OFFSET 0`;
}

/**
 * The status a reclaimed task takes (SQL), from its status before (`column`): the request's
 * target per source status (NULL for a status without one, which the NOT NULL column refuses).
 */
export function reclaimTargetSql(p: Params, to: ClaimRequest['reclaim']['to'], column: string): string {
  const arms = Object.entries(to).map(([from, target]) => `WHEN ${p.add(from, 'text')} THEN ${p.add(target, 'text')}`);
  return arms.length ? `CASE ${column} ${arms.join(' ')} END` : 'NULL';
}

/** Collects positional parameters, each with an explicit SQL type. */
export class Params implements SqlParams {
  readonly values: unknown[] = [];
  add(value: unknown, type: string): string {
    this.values.push(Array.isArray(value) ? arrayLiteral(value) : value);
    return `$${this.values.length}::${type}`;
  }
  anyOf(column: string, values: readonly unknown[], type: string): string {
    return `${column} = ANY(${this.add(values, `${type}[]`)})`;
  }
  jsonHas(column: string, value: string): string {
    return `jsonb_exists(${column}::jsonb, ${this.add(value, 'text')})`;
  }
  jsonText(column: string, path: readonly string[]): string {
    return `(${column}::jsonb #>> ${this.add(path, 'text[]')})`;
  }
}

/**
 * The columns of a multi-row statement's rows, one array parameter per column for `unnest`, all
 * of `n` elements. A batch of hundreds of rows repeats one value down most columns (the worker,
 * the status, the event, the channel), and an array is parsed element by element on both sides: a
 * column whose every row holds the same primitive value is sent as an array of that one value and
 * filled out in SQL. The statement's text is the same either way (one prepared statement); a batch of one row
 * sends its arrays as they are.
 */
export class BatchColumns {
  readonly #p: Params;
  /** The rows' count as SQL (a parameter), when there are several rows. */
  readonly #rows: string | null;

  constructor(p: Params, n: number) {
    this.#p = p;
    this.#rows = n > 1 ? p.add(n, 'integer') : null;
  }

  /** The column `values` (one per row) of SQL array type `type` (`text[]`, …), as an SQL expression. */
  add(values: readonly unknown[], type: string): string {
    if (this.#rows === null) return this.#p.add(values, type);
    const ref = this.#p.add(sameThroughout(values) ? [values[0]] : values, type);
    return `(CASE WHEN cardinality(${ref}) = 1 THEN array_fill((${ref})[1], ARRAY[${this.#rows}]) ELSE ${ref} END)`;
  }
}

/**
 * Whether every element of `values` (two or more) is the same string, number, bigint, boolean or
 * null (`undefined` counts as null, as in the array literal; NaN is never the same as itself).
 */
function sameThroughout(values: readonly unknown[]): boolean {
  const first = values[0] ?? null;
  if (values.length < 2 || (typeof first === 'object' && first !== null)) return false;
  for (let i = 1; i < values.length; i++) if ((values[i] ?? null) !== first) return false;
  return true;
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;
/** Characters JSON writes as escapes PostgreSQL's array syntax reads differently: controls, lone surrogates. */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const JSON_ONLY_ESCAPES = /[\u0000-\u001f\ud800-\udfff]/;

/**
 * A one-dimensional array of strings, numbers, booleans and nulls as PostgreSQL's array literal
 * text (`{"a",1,true,null}`), the form the driver sends arrays in: batched writes send dozens of
 * arrays of hundreds of elements, and the driver escapes every element with two regular
 * expressions. Inside an array literal a quoted element escapes `"` and `\` with a backslash, as
 * JSON does, and an unquoted `null` is NULL: so an array whose strings hold no control character
 * or lone surrogate (which JSON writes as `\n`, `\u…`) and whose numbers are finite is its own
 * `JSON.stringify` between braces, built natively (the journal's JSON texts are full of quotes);
 * any other goes element by element. Anything else (a nested array, an object) is left to the driver.
 */
export function arrayLiteral(values: readonly unknown[]): unknown {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string') {
      if (JSON_ONLY_ESCAPES.test(v)) return elementWise(values);
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return elementWise(values);
    } else if (v !== null && v !== undefined && typeof v !== 'boolean') return values;
  }
  return `{${JSON.stringify(values).slice(1, -1)}}`;
}

/** {@link arrayLiteral} one element at a time (for strings JSON would escape differently). */
function elementWise(values: readonly unknown[]): unknown {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) parts[i] = 'NULL';
    else if (typeof v === 'string') parts[i] = NEEDS_ESCAPE.test(v) ? `"${v.replace(ESCAPED, '\\$&')}"` : `"${v}"`;
    else if (typeof v === 'number') parts[i] = String(v);
    else if (typeof v === 'boolean') parts[i] = v ? 'true' : 'false';
    else return values;
  }
  return `{${parts.join(',')}}`;
}

/**
 * The workflows (and, where listed, only those versions) a claiming worker serves, as a condition
 * on `workflow` / `workflow_version` (the set itself: {@link servedSet}).
 */
export function servedSql(p: Params, workflows: readonly string[], versions: ClaimRequest['versions']): string {
  const { any, pinned } = servedSet(workflows, versions);
  const names: string[] = [];
  const vers: string[] = [];
  for (const [wf, vs] of pinned)
    for (const v of vs) {
      names.push(wf);
      vers.push(v);
    }
  const parts: string[] = [];
  if (any.length) parts.push(`workflow = ANY(${p.add(any, 'text[]')})`);
  if (names.length) parts.push(`(workflow, workflow_version) IN (SELECT * FROM unnest(${p.add(names, 'text[]')}, ${p.add(vers, 'text[]')}))`);
  return parts.length ? `(${parts.join(' OR ')})` : 'FALSE';
}

/** Quoted, schema-qualified table names. */
export interface Tables {
  tasks: string;
  heads: string;
  steps: string;
  events: string;
  signals: string;
  workflows: string;
  chunks: string;
  idempotency: string;
  approvals: string;
  slots: string;
  workersServed: string;
  tags: string;
  blobs: string;
  taskBlobs: string;
  alerts: string;
}

/** The tables of `schema` (a name already checked by the store). */
export function tablesOf(schema: string): Tables {
  const s = quoteIdent(schema);
  return {
    tasks: `${s}.tasks`,
    heads: `${s}.task_heads`,
    steps: `${s}.steps`,
    events: `${s}.events`,
    signals: `${s}.signals`,
    workflows: `${s}.workflows`,
    chunks: `${s}.stream_chunks`,
    idempotency: `${s}.idempotency`,
    approvals: `${s}.approvals`,
    slots: `${s}.concurrency_slots`,
    workersServed: `${s}.workers_served`,
    tags: `${s}.task_tags`,
    blobs: `${s}.blobs`,
    taskBlobs: `${s}.task_blobs`,
    alerts: `${s}.alerts`,
  };
}
