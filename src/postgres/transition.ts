/**
 * @module postgres/transition
 * Internal: not part of the public API.
 * Guarded status changes on PostgreSQL: one statement that locks the task row, checks the guard,
 * applies the patch, appends the log entries and upserts steps / consumes signals only if the
 * update happened; plus the second statement of a transition that waits for events.
 */
import { poolOf, rows, run, tx, type Db, type PgContext } from './connection.ts';
import { channelOf, listenerName, notifySql } from './listen.ts';
import { payload } from './wake.ts';
import { insertSignalOn } from './signals.ts';
import { parentSignalWrite } from '../store-sql/parent-signal.ts';
import { Params, STEP_TYPES, STEP_UPSERT_LOGGED_SET, assignments, claimEntriesSql, lockById, lockEachInIdOrder, sqlStatuses, type Tables } from './sql-text.ts';
import { copiedRows, lockHeadsSql, writeHeadsSql } from './heads.ts';
import { STEP_COLUMNS, encodeEvents, stepValues, toTaskRow } from '../rows.ts';
import { transitionWriteEntries, uniqueConsumes, uniqueSteps } from '../log-entries.ts';
import type { NewEvent, TaskRow, TransitionWrite } from '../store.ts';

/**
 * One statement, unless `set.waitEvents` names events: then a second statement in the same
 * transaction makes the task due if a matching unconsumed signal exists. It must be a separate
 * statement: under READ COMMITTED a statement's snapshot is taken when it starts, possibly before
 * a concurrent `insertSignal` (which locks the task row first) committed; the second statement
 * starts after this transaction holds the row lock, so it sees every signal committed before, and
 * any signal committed after sees this task's `wait_events`.
 */
export async function transition(c: PgContext, write: TransitionWrite): Promise<TaskRow | null> {
  const inTx = write.set.waitEvents?.length || write.parentSignal;
  return run(c, () =>
    inTx
      ? tx(c, async (client) => {
          // A child's end locks its parent too: both first, in id order (see lockInIdOrder).
          if (write.parentSignal) await lockInIdOrder(c, client, [write.taskId, write.parentSignal.taskId]);
          return transitionOn(c, client, write);
        })
      : transitionOn(c, poolOf(c), write),
  );
}

/**
 * Locks the rows of `ids` in id order, then their heads in id order, in the caller's transaction,
 * before writes that would lock them in another order: a child's end locks its parent after the
 * child, and a parent's id sorts before its children's, so a heartbeat (which locks rows in id
 * order) holding the parent and reaching for the child would deadlock with it, and so would a
 * checkpoint batch (which locks heads in id order). Two statements: every row before any head.
 */
export async function lockInIdOrder(c: PgContext, client: Db, ids: readonly string[]): Promise<void> {
  await rows(c, client, `SELECT id FROM (${lockEachInIdOrder(c.t, 'unnest($1::text[]) AS u(id)')}) l`, [ids]);
  await rows(c, client, lockHeadsSql(c.t, '$1::text[]'), [ids]);
}

/** {@link transition} on `db` (the pool, or a client in the caller's transaction). */
export async function transitionOn(c: PgContext, db: Db, w: TransitionWrite): Promise<TaskRow | null> {
  if (!w.from.length) return null;
  const { text, values } = transitionSql(c, w);
  const [row] = await rows(c, db, text, values);
  if (!row) return null;
  // A child's end reaches its parent in the same transaction (`db` is then a client in one).
  if (w.parentSignal) await insertSignalOn(c, db, parentSignalWrite(w.parentSignal, toTaskRow(row), w.at));
  const events = encodeEvents(w.set.waitEvents ?? null);
  if (events !== null) {
    const [due] = await rows(
      c,
      db,
      `UPDATE ${c.t.tasks} SET run_at = $1 WHERE id = $2 AND EXISTS
           (SELECT 1 FROM ${c.t.signals} WHERE task_id = $2 AND consumed_seq IS NULL AND strpos($3, '|' || name || '|') > 0)
         RETURNING *`,
      [w.at, w.taskId, events],
    );
    if (due) return toTaskRow(due);
  }
  return toTaskRow(row);
}

/**
 * `cur` locks the task and keeps it if the guard holds (checked on the newest row version, once
 * a concurrent writer has committed); `upd` applies the patch; `hd` copies the status to the
 * task's head and adds the number of entries to its log counter; `log` appends the entries numbered below the new counter; `steps` and
 * `consumed` run only if `upd` did.
 */
function transitionSql(c: PgContext, w: TransitionWrite): { text: string; values: unknown[] } {
  const t = c.t;
  const p = new Params();
  const id = p.add(w.taskId, 'text');
  const guard = 'version' in w.guard ? `version = ${p.add(w.guard.version, 'integer')}` : `epoch = ${p.add(w.guard.epoch, 'integer')}`;
  const pause = w.pauseRequested === undefined ? '' : ` AND pause_requested = ${w.pauseRequested ? 'TRUE' : 'FALSE'}`;
  const to = p.add(w.to, 'text');
  const at = p.add(w.at, 'bigint');
  const sets = assignments(w.set, p);
  const entries = transitionWriteEntries(w);
  const n = p.add(entries.length, 'integer');
  let text = `WITH cur AS (
        SELECT id AS cur_id FROM (${lockById(t, id, 'UPDATE')}) l
        WHERE status IN (${sqlStatuses(w.from)}) AND ${guard}${pause}
      ), upd AS (
        UPDATE ${t.tasks} AS t SET status = ${to}, version = t.version + 1, updated_at = ${at}${sets}
        FROM cur WHERE t.id = cur.cur_id RETURNING t.*
      ), ${writeHeadsSql(t, 'hd', copiedRows('upd', n))}, log AS (${appendSql(t, p, 'hd', 'hd.id', `hd.event_seq - ${n}`, at, entries)}
      )`;
  const steps = uniqueSteps(w.steps ?? []);
  // Journal rows this write deletes or rewrites keep the entries they carry: stored on their own
  // first, same seq (one snapshot: this reads the rows as they were before the statement).
  const touched = [...(w.deleteSteps ?? []), ...steps.map((s) => s.seq)];
  if (touched.length) {
    text += `, kept AS (
        INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT s.task_id, s.log_seq, coalesce(s.finished_at, s.started_at, 0), 'step:' || s.status, 'worker',
          coalesce((SELECT e.actor_id FROM (${claimEntriesSql(t, 's.task_id')}) e WHERE (e.data::json->>'epoch')::int = s.epoch LIMIT 1), 'unknown'),
          json_build_object('seq', s.seq, 'name', s.name, 'kind', s.kind, 'status', s.status, 'output', s.output::json, 'error', s.error::json,
            'attempts', s.attempts, 'startedAt', s.started_at, 'finishedAt', s.finished_at, 'wakeAt', s.wake_at, 'epoch', s.epoch,
            'done', s.done, 'calledAfter', s.called_after, 'businessKey', s.business_key)::text
        FROM ${t.steps} s WHERE s.task_id = ${id} AND s.log_seq IS NOT NULL AND s.seq = ANY(${p.add(touched, 'integer[]')}) AND EXISTS (SELECT 1 FROM upd)
      )`;
  }
  if (steps.length) {
    const columns = STEP_COLUMNS.map((_, i) =>
      p.add(
        steps.map((s) => stepValues(s)[i]),
        `${STEP_TYPES[i]}[]`,
      ),
    );
    // A row carrying its entry takes that entry's seq: its place among this write's entries.
    const places = p.add(
      steps.map((s) => {
        const j = entries.findIndex((e) => e.carriedBy === s.seq);
        return j < 0 ? null : j + 1;
      }),
      'integer[]',
    );
    text += `, steps AS (
        INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
        SELECT ${STEP_COLUMNS.map((col) => `j.${col}`).join(', ')}, hd.event_seq - ${n} + j.place
        FROM unnest(${columns.join(', ')}, ${places}) AS j(${STEP_COLUMNS.join(', ')}, place), hd
        ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
      )`;
  }
  if (w.deleteSteps?.length) {
    text += `, deleted AS (
        DELETE FROM ${t.steps} WHERE task_id = ${id} AND seq = ANY(${p.add(w.deleteSteps, 'integer[]')}) AND EXISTS (SELECT 1 FROM upd)
      )`;
  }
  const consume = uniqueConsumes(w.consume ?? []);
  if (consume.length) {
    text += `, consumed AS (
        UPDATE ${t.signals} AS s SET consumed_seq = c.seq
        FROM unnest(${p.add(
          consume.map((x) => x.signalId),
          'bigint[]',
        )}, ${p.add(
          consume.map((x) => x.seq),
          'integer[]',
        )}) AS c(id, seq)
        WHERE s.id = c.id AND s.consumed_seq IS NULL AND EXISTS (SELECT 1 FROM upd)
      )`;
  }
  text += w.notify
    ? ` SELECT upd.*, ${notifySql(p.add(channelOf(c, w.notify), 'text'), p.add(payload(w.notify), 'text'), p.add(listenerName(channelOf(c, w.notify)), 'text'))} AS notified FROM upd`
    : ' SELECT * FROM upd';
  return { text, values: p.values };
}

/**
 * An INSERT of `entries` into the log of the task `task` for each row of `from` (one row at
 * most), numbered `base` + 1, + 2, … by their place (`base`: the task's counter before this
 * write). Entries carried by journal rows keep their place but are not inserted.
 */
export function appendSql(t: Tables, p: Params, from: string, task: string, base: string, at: string, entries: readonly NewEvent[]): string {
  const own = entries.map((e, i) => ({ e, place: i + 1 })).filter((x) => x.e.carriedBy === undefined);
  return `
        INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT ${task}, ${base} + e.place, ${at}, e.type, e.kind, e.actor, e.data
        FROM ${from}, unnest(${p.add(
          own.map((x) => x.e.type),
          'text[]',
        )}, ${p.add(
          own.map((x) => x.e.actorKind),
          'text[]',
        )},
          ${p.add(
            own.map((x) => x.e.actorId),
            'text[]',
          )}, ${p.add(
            own.map((x) => x.e.data),
            'text[]',
          )},
          ${p.add(
            own.map((x) => x.place),
            'integer[]',
          )}) AS e(type, kind, actor, data, place)`;
}
