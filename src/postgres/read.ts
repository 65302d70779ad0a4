/**
 * @module postgres/read
 * Internal: not part of the public API.
 * The PostgreSQL store's reads: a task (or many) by id, a task by idempotency key, task listings,
 * a task's journal, log entries and signals, and the log of every task in commit-safe (xid, id)
 * order. Each is one autocommit statement on the pool.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import { Params, claimEntriesSql } from './sql-text.ts';
import { taskListSql } from '../store-sql/filters.ts';
import { InvalidArgumentError } from '../errors.ts';
import { toEventRow, toSignalRow, toStepRow, toTaskRow } from '../rows.ts';
import type { EventRange, EventRow, ListQuery, LogPage, SignalRow, StepRow, TaskRow } from '../store.ts';
import { RESULT_ENTRY_TYPES_SQL, claimersOf, mergeLog } from '../log-entries.ts';

export async function getTask(c: PgContext, id: string): Promise<TaskRow | null> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), `SELECT * FROM ${c.t.tasks} WHERE id = $1`, [id]);
    return row ? toTaskRow(row) : null;
  });
}

/** The tasks of `ids` that exist, in one statement. */
export async function getTasks(c: PgContext, ids: readonly string[]): Promise<TaskRow[]> {
  if (!ids.length) return [];
  return run(c, async () => (await rows(c, poolOf(c), `SELECT * FROM ${c.t.tasks} WHERE id = ANY($1::text[])`, [ids])).map(toTaskRow));
}

export async function findTaskByKey(c: PgContext, key: string): Promise<TaskRow | null> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), `SELECT * FROM ${c.t.tasks} WHERE idempotency_key = $1`, [key]);
    return row ? toTaskRow(row) : null;
  });
}

export async function listTasks(c: PgContext, q: ListQuery): Promise<TaskRow[]> {
  return run(c, async () => {
    const p = new Params();
    const text = taskListSql(q, p, c.t);
    return (await rows(c, poolOf(c), text, p.values)).map(toTaskRow);
  });
}

export async function getSteps(c: PgContext, taskId: string): Promise<StepRow[]> {
  return run(c, async () => (await rows(c, poolOf(c), `SELECT * FROM ${c.t.steps} WHERE task_id = $1 ORDER BY seq`, [taskId])).map(toStepRow));
}

/**
 * A task's log: its entries of their own and those its journal rows carry (a step's result), in
 * one statement and so one snapshot: an entry a retry moves from its row to `events` is seen in
 * exactly one of the two places. `c` rows are the claims, for the carried entries' actors.
 */
export async function getEvents(c: PgContext, taskId: string, after = 0, limit?: number): Promise<EventRow[]> {
  return run(c, async () => {
    const t = c.t;
    const found = await rows(
      c,
      poolOf(c),
      `(SELECT 'e' AS src, task_id, seq, at, type, actor_kind, actor_id, data FROM ${t.events} WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3)
       UNION ALL (SELECT 's', task_id, log_seq, 0, NULL, NULL, NULL, row_to_json(s)::text FROM ${t.steps} s WHERE task_id = $1 AND log_seq > $2 ORDER BY log_seq LIMIT $3)
       UNION ALL SELECT 'c', $1, 0, 0, 'transition', 'worker', c.actor_id, c.data FROM (${claimEntriesSql(t, '$1')}) c
         WHERE EXISTS (SELECT 1 FROM ${t.steps} WHERE task_id = $1 AND log_seq > $2)`,
      [taskId, after, limit ?? null],
    );
    return logOf(taskId, found, limit);
  });
}

export async function getEventsOfType(c: PgContext, taskId: string, types: readonly string[]): Promise<EventRow[]> {
  if (!types.length) return [];
  return run(c, async () =>
    (
      await rows(c, poolOf(c), `SELECT task_id, seq, at, type, actor_kind, actor_id, data FROM ${c.t.events} WHERE task_id = $1 AND type = ANY($2::text[]) ORDER BY seq`, [taskId, types])
    ).map(toEventRow),
  );
}

/** A task's log from the rows of a read as `getEvents` makes it: `src` 'e' entries, 's' journal rows, 'c' claims. */
function logOf(taskId: string, found: readonly Record<string, unknown>[], limit?: number): EventRow[] {
  const own = found.filter((r) => r.src === 'e').map(toEventRow);
  const carried = found.filter((r) => r.src === 's').map((r) => ({ step: toStepRow(JSON.parse(String(r.data)) as Record<string, unknown>), logSeq: Number(r.seq) }));
  const claimers = carried.length
    ? claimersOf(found.filter((r) => r.src === 'c').map((r) => ({ actorKind: String(r.actor_kind), actorId: String(r.actor_id), data: r.data === null ? null : String(r.data) })))
    : new Map<number, string>();
  return mergeLog(taskId, own, carried, claimers, limit);
}

/** `getEvents` for several seq ranges in one statement (one snapshot). */
export async function getEventRanges(c: PgContext, ranges: readonly EventRange[]): Promise<EventRow[][]> {
  if (!ranges.length) return [];
  return run(c, async () => {
    const t = c.t;
    const found = await rows(
      c,
      poolOf(c),
      `WITH r AS (SELECT * FROM unnest($1::text[], $2::integer[], $3::integer[]) WITH ORDINALITY AS r(task_id, lo, hi, ord))
       SELECT 'e' AS src, r.ord, e.task_id, e.seq, e.at, e.type, e.actor_kind, e.actor_id, e.data
         FROM r JOIN ${t.events} e ON e.task_id = r.task_id AND e.seq > r.lo AND e.seq < r.hi
       UNION ALL SELECT 's', r.ord, s.task_id, s.log_seq, 0, NULL, NULL, NULL, row_to_json(s)::text
         FROM r JOIN ${t.steps} s ON s.task_id = r.task_id AND s.log_seq > r.lo AND s.log_seq < r.hi
       UNION ALL SELECT 'c', r.ord, r.task_id, 0, 0, 'transition', 'worker', c.actor_id, c.data
         FROM r CROSS JOIN LATERAL (${claimEntriesSql(t, 'r.task_id')}) c
         WHERE EXISTS (SELECT 1 FROM ${t.steps} s WHERE s.task_id = r.task_id AND s.log_seq > r.lo AND s.log_seq < r.hi)`,
      [ranges.map((r) => r.taskId), ranges.map((r) => r.after), ranges.map((r) => r.before)],
    );
    const byRange = ranges.map((): Record<string, unknown>[] => []);
    for (const row of found) byRange[Number(row.ord) - 1]?.push(row);
    return ranges.map((r, i) => logOf(r.taskId, byRange[i] ?? []));
  });
}

/**
 * The log of every task in (xid, id) order, only rows of transactions older than the snapshot's
 * xmin. Identity ids are handed out when rows are inserted, not when they commit: a transaction
 * holding id 10 may commit after one holding id 11, so "after id 11" would skip 10 for good. A
 * transaction's xid is taken before it writes, and every transaction with an xid below the
 * snapshot's xmin has ended (committed, its rows visible, or rolled back): no row can ever be
 * added below that line. So a page holds everything there is up to its last (xid, id), and a
 * later read from that cursor misses nothing. Entries of a transaction still running (or a
 * long transaction holding xmin back) wait until it ends. The cursor is `<xid>:<id>`. Step results
 * moved out of journal rows are left out, and each row says its task's previous one (see `LogPage`).
 *
 * This order is not always a task's seq order. A transaction's xid is taken at its first write,
 * its seqs when it locks the task's head: one that took its xid, then waited for the head while a
 * younger transaction appended to the task, numbers its entries after the younger one's and is
 * placed before them here. `prevSeq` therefore only counts entries placed before the row, and
 * the reader (event-stream.ts) delivers the task's lower seqs placed after it first.
 */
export async function readLog(c: PgContext, after: string | null, limit: number, mark?: string | null): Promise<LogPage> {
  let xid = '0';
  let id = '0';
  if (after !== null) {
    const m = /^(\d{1,20}):(\d{1,19})$/.exec(after);
    if (!m) throw new InvalidArgumentError(`Invalid log cursor "${after}"`);
    [xid, id] = [m[1] as string, m[2] as string];
  }
  if (mark != null && !/^\d{1,20}$/.test(mark)) throw new InvalidArgumentError(`Invalid log mark "${mark}"`);
  return run(c, async () => {
    // One statement, so the rows and the horizon they were read under come from one snapshot: the
    // outer row is there even when no entry is, to say whether the horizon has passed the mark.
    const found = await rows(
      c,
      poolOf(c),
      `SELECT e.*, h.horizon < $4::xid8 AS behind
         FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon) h
         LEFT JOIN LATERAL (
           SELECT task_id, seq, at, type, actor_kind, actor_id, data, xid, xid::text AS xid_text, id,
               coalesce((SELECT p.seq FROM ${c.t.events} p WHERE p.task_id = e.task_id AND p.seq < e.seq AND (p.xid, p.id) < (e.xid, e.id)
                 AND p.type NOT IN (${RESULT_ENTRY_TYPES_SQL}) ORDER BY p.seq DESC LIMIT 1), 0) AS prev_seq
             FROM ${c.t.events} e
             WHERE (xid, id) > ($1::xid8, $2::bigint) AND xid < h.horizon AND type NOT IN (${RESULT_ENTRY_TYPES_SQL})
             ORDER BY xid, id LIMIT $3
         ) e ON true
         ORDER BY e.xid, e.id`,
      [xid, id, limit, mark ?? null],
    );
    const page = found.filter((r) => r.task_id !== null);
    const last = page.at(-1);
    return {
      events: page.map((r) => ({ ...toEventRow(r), cursor: `${String(r.xid_text)}:${String(r.id)}`, prevSeq: Number(r.prev_seq) })),
      cursor: last ? `${String(last.xid_text)}:${String(last.id)}` : after,
      behind: found[0]?.behind === true,
    };
  });
}

/**
 * The end of the log now: the snapshot's xmax, the first transaction id not yet handed out. Every
 * entry committed before this call has a lower xid, so `readLog` has returned it once its horizon
 * (the xmin of its snapshot) reaches the mark, that is once every transaction that was running at
 * this call has ended.
 */
export async function logMark(c: PgContext): Promise<string> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), 'SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS mark');
    return String(row?.mark);
  });
}

export async function getSignalByKey(c: PgContext, taskId: string, key: string): Promise<SignalRow | undefined> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), `SELECT * FROM ${c.t.signals} WHERE task_id = $1 AND idempotency_key = $2`, [taskId, key]);
    return row ? toSignalRow(row) : undefined;
  });
}

export async function pendingSignals(c: PgContext, taskId: string, afterId: number): Promise<SignalRow[]> {
  return run(c, async () =>
    (await rows(c, poolOf(c), `SELECT * FROM ${c.t.signals} WHERE task_id = $1 AND consumed_seq IS NULL AND id > $2 ORDER BY id`, [taskId, afterId])).map(toSignalRow),
  );
}

export async function getSignals(c: PgContext, taskId: string): Promise<SignalRow[]> {
  return run(c, async () => (await rows(c, poolOf(c), `SELECT * FROM ${c.t.signals} WHERE task_id = $1 ORDER BY id`, [taskId])).map(toSignalRow));
}
