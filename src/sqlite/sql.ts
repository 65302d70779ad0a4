/**
 * @module sqlite/sql
 * Internal: not part of the public API.
 * The SQLite text that several operation modules share: IN lists of statuses (as literals, for the
 * partial indexes), the journal upsert, the fence of a checkpoint, a log's last seq, an entry's insert.
 */
import { STEP_COLUMNS } from '../rows.ts';
import { LEASED_STATUSES, type TaskStatus } from '../lifecycle.ts';
import { statusLiterals } from '../store-sql/filters.ts';
import type { SqlParams, SqlType } from '../store-sql/params.ts';

export const inList = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
/**
 * Statuses as SQL literals (see `store-sql/filters.ts`): with literals, rather than bound
 * parameters, SQLite can prove that a query implies a partial index's WHERE clause and use it.
 */
export const statusList = statusLiterals;

/** SQLite's {@link SqlParams}: `?` placeholders; lists and JSON arrays through `json_each`. */
export class SqliteParams implements SqlParams {
  readonly values: unknown[] = [];
  /** The type is PostgreSQL's business: SQLite binds the value as it is. */
  add(value: unknown, _type?: SqlType): string {
    this.values.push(value);
    return '?';
  }
  anyOf(column: string, values: readonly unknown[]): string {
    return `${column} IN (SELECT value FROM json_each(${this.add(JSON.stringify(values))}))`;
  }
  jsonHas(column: string, value: string): string {
    return `EXISTS (SELECT 1 FROM json_each(${column}) WHERE value = ${this.add(value)})`;
  }
  jsonText(column: string, path: readonly string[]): string {
    return `json_extract(${column}, ${this.add(`$${path.map((k) => `.${JSON.stringify(k)}`).join('')}`)})`;
  }
}
export const LEASED_SQL = statusList(LEASED_STATUSES);
/** {@link statusList} of a transition's source statuses (one, mostly), remembered. */
const fromLists = new Map<string, string>();
export const fromList = (from: readonly TaskStatus[]): string => {
  const key = from.length === 1 ? (from[0] as string) : from.join(',');
  let sql = fromLists.get(key);
  if (sql === undefined) fromLists.set(key, (sql = statusList(from)));
  return sql;
};
/** The WHERE clauses of the partial indexes for claims (sql/sqlite/000001_init.sql). */
export const DUE_INDEX: readonly TaskStatus[] = ['pending', 'waiting'];
export const LEASED_INDEX: readonly TaskStatus[] = ['running', 'cancelling'];
/**
 * `status IN (…)` for a claim query. SQLite uses a partial index only when the query repeats the
 * index's own WHERE term, so it is added when the statuses asked for are among the index's.
 */
export const statusTerm = (statuses: readonly TaskStatus[], index: readonly TaskStatus[]): string =>
  statuses.every((s) => index.includes(s)) ? `status IN (${statusList(index)}) AND status IN (${statusList(statuses)})` : `status IN (${statusList(statuses)})`;
const STEP_VALUE_COLUMNS = STEP_COLUMNS.slice(1); // the journal refers to its task by `task_no`
/** A journal row with the log seq of the entry it carries (or NULL), inserted or replaced. */
export const UPSERT_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq) VALUES (?, ${inList(STEP_VALUE_COLUMNS.length + 1)})
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/**
 * The hot path of a step result (a row that carries its log entry): fence and row in one
 * autocommit statement, its entry numbered from this connection's count of the task's log. The
 * count is right unless another connection appended to the task's log since (a command or a
 * signal: only the lease holder writes its journal), which shows as an entry at or past that seq:
 * then no row is written and the write is done again in a transaction that reads the log afresh.
 */
export const HOT_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq)
  SELECT ?, ${inList(STEP_VALUE_COLUMNS.length)}, ? FROM stepwise_tasks
  WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL}) AND NOT EXISTS (SELECT 1 FROM stepwise_events WHERE task_no = ? AND seq >= ?)
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/**
 * A step result in a write transaction: the fence and the row in one statement (its entry's seq
 * taken from this connection's count, read afresh in the transaction: see `SqliteContext.takeSeqs`).
 */
export const FENCED_RESULT_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq)
  SELECT ?, ${inList(STEP_VALUE_COLUMNS.length)}, ? FROM stepwise_tasks WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL})
  ON CONFLICT (task_no, seq) DO UPDATE SET ${[...STEP_COLUMNS.slice(2), 'log_seq'].map((c) => `${c} = excluded.${c}`).join(', ')}`;
/** A journal row that is new (a transition's rows are mostly new: then nothing is read first). */
export const INSERT_NEW_STEP_SQL = `INSERT INTO stepwise_steps (task_no, ${STEP_VALUE_COLUMNS.join(', ')}, log_seq) VALUES (?, ${inList(STEP_VALUE_COLUMNS.length + 1)})
  ON CONFLICT (task_no, seq) DO NOTHING`;
/**
 * The fence of a checkpoint: the lease holder if the task is leased at the writer's epoch, else no
 * row. Fences name the task by its key and its id (a deleted task's key can be handed out again).
 */
export const FENCE_STEP_SQL = `SELECT lease_owner FROM stepwise_tasks WHERE no = ? AND id = ? AND epoch = ? AND status IN (${LEASED_SQL})`;
/** A task's last log seq, from both places entries are stored. */
export const LAST_SEQ_SQL = `SELECT max(coalesce((SELECT max(seq) FROM stepwise_events WHERE task_no = ?), 0),
  coalesce((SELECT max(log_seq) FROM stepwise_steps WHERE task_no = ?), 0)) AS n`;
/** {@link LAST_SEQ_SQL} of the row a statement on `stepwise_tasks` returns (as `last_seq`). */
export const RETURNING_LAST_SEQ = `max(coalesce((SELECT max(seq) FROM stepwise_events WHERE task_no = stepwise_tasks.no), 0),
  coalesce((SELECT max(log_seq) FROM stepwise_steps WHERE task_no = stepwise_tasks.no), 0)) AS last_seq`;
/** A claim of one picked task: the row comes back with its log's last seq (see {@link RETURNING_LAST_SEQ}). */
export const CLAIM_TASK_SQL = `UPDATE stepwise_tasks SET status = ?, lease_owner = ?, lease_expires_at = ?, epoch = epoch + 1,
    version = version + 1, runs = runs + 1, wait = NULL, wait_events = NULL, updated_at = ?
  WHERE id = ? RETURNING *, ${RETURNING_LAST_SEQ}`;
export const INSERT_EVENT_SQL = 'INSERT INTO stepwise_events (task_no, seq, at, type, actor_kind, actor_id, data) VALUES (?, ?, ?, ?, ?, ?, ?)';
