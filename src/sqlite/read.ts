/**
 * @module sqlite/read
 * Internal: not part of the public API.
 * Reads on SQLite: tasks, journals, signals, and the log (a task's entries, merged from the events
 * table and the journal rows that carry step results; every task's log in commit order).
 */
import { InvalidArgumentError } from '../errors.ts';
import { RESULT_ENTRY_TYPES_SQL, mergeLog } from '../log-entries.ts';
import { toEventRow, toSignalRow, toStepRow, toTaskRow } from '../rows.ts';
import type { EventRange, EventRow, ListQuery, LogPage, SignalRow, StepRow, TaskRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { SqliteParams } from './sql.ts';
import { taskListSql } from '../store-sql/filters.ts';

export function getTask(c: SqliteContext, id: string): TaskRow | null {
  const row = c.stmt('SELECT * FROM stepwise_tasks WHERE id = ?').get(id) as Raw | undefined;
  return row ? toTaskRow(row) : null;
}

export function getTasks(c: SqliteContext, ids: readonly string[]): TaskRow[] {
  const get = c.stmt('SELECT * FROM stepwise_tasks WHERE id = ?');
  const out: TaskRow[] = [];
  for (const id of new Set(ids)) {
    const row = get.get(id) as Raw | undefined;
    if (row) out.push(toTaskRow(row));
  }
  return out;
}

export function byKey(c: SqliteContext, key: string): TaskRow | null {
  const row = c.stmt('SELECT * FROM stepwise_tasks WHERE idempotency_key = ?').get(key) as Raw | undefined;
  return row ? toTaskRow(row) : null;
}

export function listTasks(c: SqliteContext, q: ListQuery): TaskRow[] {
  const p = new SqliteParams();
  const sql = taskListSql(q, p, { tasks: 'stepwise_tasks', tags: 'stepwise_task_tags' });
  return (c.stmt(sql).all(...p.values) as Raw[]).map(toTaskRow);
}

export function getSteps(c: SqliteContext, taskId: string): StepRow[] {
  const no = c.noNow(taskId);
  return no === undefined ? [] : c.steps(taskId, no);
}

export function getEvents(c: SqliteContext, taskId: string, after: number, limit: number | undefined): EventRow[] {
  // One read transaction, one snapshot: a write of another process between the two reads could
  // otherwise hide an entry (a retry moving one from its row to the table).
  return c.translate(() =>
    c.db.transaction(() => {
      const no = c.noNow(taskId);
      return no === undefined ? [] : taskLog(c, taskId, no, after, limit);
    })(),
  );
}

export function getEventsOfType(c: SqliteContext, taskId: string, types: readonly string[]): EventRow[] {
  const no = c.noNow(taskId);
  if (no === undefined || !types.length) return [];
  return (
    c.stmt('SELECT ? AS task_id, * FROM stepwise_events WHERE task_no = ? AND type IN (SELECT value FROM json_each(?)) ORDER BY seq').all(taskId, no, JSON.stringify(types)) as Raw[]
  ).map(toEventRow);
}

export function getEventRanges(c: SqliteContext, ranges: readonly EventRange[]): EventRow[][] {
  // One read transaction for all of them, as for one task.
  return c.translate(() =>
    c.db.transaction(() =>
      ranges.map((r) => {
        if (r.before <= r.after + 1) return [];
        const no = c.noNow(r.taskId);
        if (no === undefined) return [];
        return taskLog(c, r.taskId, no, r.after, r.before - r.after - 1).filter((e) => e.seq < r.before);
      }),
    )(),
  );
}

/** A task's log after `after`, at most `limit` entries (in a read transaction of the caller's). */
function taskLog(c: SqliteContext, taskId: string, no: number, after: number, limit: number | undefined): EventRow[] {
  const own = (c.stmt('SELECT ? AS task_id, * FROM stepwise_events WHERE task_no = ? AND seq > ? ORDER BY seq LIMIT ?').all(taskId, no, after, limit ?? -1) as Raw[]).map(toEventRow);
  const carried = (c.stmt('SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? AND log_seq > ? ORDER BY log_seq LIMIT ?').all(taskId, no, after, limit ?? -1) as Raw[]).map((r) => ({
    step: toStepRow(r),
    logSeq: Number(r.log_seq),
  }));
  return mergeLog(taskId, own, carried, carried.length ? c.claimers(no) : new Map(), limit);
}

/**
 * The log of every task in `id` order. Writers take the file's write lock one at a time and a
 * row's id is max(id) + 1 when it is inserted, so ids are assigned in commit order: a reader
 * that resumes after the last id it saw misses nothing. The cursor is that id, as text. Step
 * results moved out of journal rows are left out, and each row says its task's previous one (see `LogPage`).
 */
export function readLog(c: SqliteContext, after: string | null, limit: number): LogPage {
  const from = after === null ? 0 : Number(after);
  if (!Number.isSafeInteger(from)) throw new InvalidArgumentError(`Invalid log cursor "${after}"`);
  const rows = c.translate(() =>
    c
      .stmt(
        `SELECT e.id, t.id AS task_id, e.seq, e.at, e.type, e.actor_kind, e.actor_id, e.data,
       coalesce((SELECT p.seq FROM stepwise_events p WHERE p.task_no = e.task_no AND p.seq < e.seq AND p.id < e.id
         AND p.type NOT IN (${RESULT_ENTRY_TYPES_SQL}) ORDER BY p.seq DESC LIMIT 1), 0) AS prev_seq
     FROM stepwise_events e JOIN stepwise_tasks t ON t.no = e.task_no WHERE e.id > ? AND e.type NOT IN (${RESULT_ENTRY_TYPES_SQL}) ORDER BY e.id LIMIT ?`,
      )
      .all(from, limit),
  ) as Raw[];
  const last = rows.at(-1);
  return { events: rows.map((r) => ({ ...toEventRow(r), cursor: String(r.id), prevSeq: Number(r.prev_seq) })), cursor: last ? String(last.id) : after, behind: false };
}

export function getSignalByKey(c: SqliteContext, taskId: string, key: string): SignalRow | undefined {
  const row = c.stmt('SELECT * FROM stepwise_signals WHERE task_id = ? AND idempotency_key = ?').get(taskId, key) as Raw | undefined;
  return row ? toSignalRow(row) : undefined;
}

export function pendingSignals(c: SqliteContext, taskId: string, afterId: number): SignalRow[] {
  return (c.stmt('SELECT * FROM stepwise_signals WHERE task_id = ? AND consumed_seq IS NULL AND id > ? ORDER BY id').all(taskId, afterId) as Raw[]).map(toSignalRow);
}

export function getSignals(c: SqliteContext, taskId: string): SignalRow[] {
  return (c.stmt('SELECT * FROM stepwise_signals WHERE task_id = ? ORDER BY id').all(taskId) as Raw[]).map(toSignalRow);
}
