/**
 * @module postgres/transition-batch-sql
 * Internal: not part of the public API (the package exports only its index modules).
 * Group commit of end-of-run transitions on PostgreSQL (epoch-guarded, without deletions, consumed
 * signals or an event wait): one multi-row `UPDATE … FROM unnest(…)` over the task rows, locked
 * `FOR UPDATE` in id order, whose status, epoch and pause request match, plus their log entries
 * (numbered from the counter the same UPDATE bumps), the journal rows they carry and, for
 * finished children, their signals to their parents (for the tasks whose update happened), and
 * the wake-ups, grouped per channel.
 */
import { STEP_COLUMNS } from '../rows.ts';
import { transitionWriteEntries } from '../log-entries.ts';
import type { NewEvent, StepRow, TransitionWrite, WakeEvent } from '../store.ts';
import { END_SQL, HEAD_SQL, PATCH_COLUMNS, TASK_COLUMNS, patchValue } from '../task-columns.ts';
import { listenerName, notifySql } from './listen.ts';
import { parentSignalNotify } from '../store-sql/parent-signal.ts';
import { BatchColumns, Params, STEP_UPSERT_LOGGED_SET, lockById, lockEachInIdOrder, type Tables } from './sql-text.ts';
import { writeHeadsSql } from './heads.ts';
import { stepColumns } from './batch-sql.ts';

/** Task ids in one grouped notification: well under PostgreSQL's 8,000-byte payload limit. */
const GROUP_IDS = 200;

/** News that many tasks can share one notification for: finished, or runnable again. */
function groupable(e: WakeEvent): boolean {
  return e.reason === 'settled' || e.reason === 'task';
}

/**
 * Whether a transition can go into {@link transitionBatchSql}. A child's end (with its signal to
 * the parent) can, unless its parent is written by the same batch (see {@link batchableTransitions}).
 */
export function isBatchableTransition(w: TransitionWrite): boolean {
  return 'epoch' in w.guard && w.from.length === 1 && !w.deleteSteps?.length && !w.consume?.length && !w.set.waitEvents?.length && !w.set.expireLease && !w.set.incrementEpoch;
}

/**
 * Of the transitions `ops` (each batchable, of distinct tasks), those that can share one
 * {@link transitionBatchSql} statement: a child's end whose parent is also one of the batch's tasks
 * is left out, as one statement cannot update a row twice (the parent's own transition and the
 * child's signal to it). It goes through the one-by-one path, in the same transaction as the rest.
 */
export function batchableTransitions<T extends { op: TransitionWrite }>(ops: readonly T[]): { batch: T[]; rest: T[] } {
  if (!ops.some((x) => x.op.parentSignal)) return { batch: [...ops], rest: [] };
  const tasks = new Set(ops.map((x) => x.op.taskId));
  const batch: T[] = [];
  const rest: T[] = [];
  for (const x of ops) (x.op.parentSignal && tasks.has(x.op.parentSignal.taskId) ? rest : batch).push(x);
  return { batch, rest };
}

/** Every op's log entries, flattened, as array parameters: op position (1-based, as `ord`), place in the op's entries. */
function entryParams(p: Params, entries: readonly NewEvent[][]): Record<'op' | 'j' | 'type' | 'kind' | 'actor' | 'data', string> {
  // Loops rather than per-call callbacks throughout this module: it runs once per batch, and V8
  // compiles a per-call closure again after each quiet spell of the worker (see resolvers.ts).
  const op: number[] = [];
  const j: number[] = [];
  const type: string[] = [];
  const kind: string[] = [];
  const actor: Array<string | null> = [];
  const data: Array<string | null> = [];
  for (let k = 0; k < entries.length; k++) {
    const list = entries[k] as NewEvent[];
    for (let n = 0; n < list.length; n++) {
      const e = list[n] as NewEvent;
      if (e.carriedBy !== undefined) continue;
      op.push(k + 1);
      j.push(n + 1);
      type.push(e.type);
      kind.push(e.actorKind);
      actor.push(e.actorId);
      data.push(e.data);
    }
  }
  const col = new BatchColumns(p, op.length);
  return {
    op: col.add(op, 'integer[]'),
    j: col.add(j, 'integer[]'),
    type: col.add(type, 'text[]'),
    kind: col.add(kind, 'text[]'),
    actor: col.add(actor, 'text[]'),
    data: col.add(data, 'text[]'),
  };
}

/** Each channel's listener name (null for none); `names` caches them, so each channel is hashed once. */
function listenerNames(channels: ReadonlyArray<string | null>, names: Map<string, string>): Array<string | null> {
  const out = new Array<string | null>(channels.length);
  for (let k = 0; k < channels.length; k++) {
    const ch = channels[k] ?? null;
    if (ch === null) {
      out[k] = null;
      continue;
    }
    let name = names.get(ch);
    if (name === undefined) names.set(ch, (name = listenerName(ch)));
    out[k] = name;
  }
  return out;
}

/** The patch fields some op of the batch sets (to a value, not `undefined`): the ops' own keys, a few each. */
function patchColumnsSet(ops: readonly TransitionWrite[]): Set<string> {
  const used = new Set<string>();
  for (let k = 0; k < ops.length; k++) {
    const set = (ops[k] as TransitionWrite).set as Record<string, unknown>;
    for (const field in set) if (set[field] !== undefined) used.add(field);
  }
  return used;
}

/** Whether the transition's patch sets `field` (to a value, not `undefined`). */
function setsField(w: TransitionWrite, field: string): boolean {
  return field in w.set && (w.set as Record<string, unknown>)[field] !== undefined;
}

/** The per-op columns every transition batch has, as array parameters (added in a fixed order). */
function baseColumns(
  p: BatchColumns,
  ops: readonly TransitionWrite[],
  entries: readonly NewEvent[][],
  channelOf: (event: WakeEvent) => string,
  names: Map<string, string>,
): Record<string, string> {
  const n = ops.length;
  const id = new Array<string>(n);
  const epoch = new Array<number | null>(n);
  const fromStatus = new Array<string | undefined>(n);
  const toStatus = new Array<string>(n);
  const event = new Array<string>(n);
  const at = new Array<number>(n);
  const evN = new Array<number>(n);
  const pauseGuard = new Array<boolean | null>(n);
  const clearLease = new Array<boolean>(n);
  const retries = new Array<boolean>(n);
  const notifyGroup = new Array<string | null>(n);
  const notify = new Array<string | null>(n);
  const channels = new Array<string | null>(n);
  for (let k = 0; k < n; k++) {
    const w = ops[k] as TransitionWrite;
    id[k] = w.taskId;
    epoch[k] = 'epoch' in w.guard ? w.guard.epoch : null;
    fromStatus[k] = w.from[0];
    toStatus[k] = w.to;
    event[k] = w.event;
    at[k] = w.at;
    evN[k] = (entries[k] as unknown[]).length;
    pauseGuard[k] = w.pauseRequested ?? null;
    clearLease[k] = w.set.clearLease === true;
    retries[k] = w.set.incrementRetries === true;
    // Finished tasks and tasks handed back go out as one notification per channel and reason (at
    // most GROUP_IDS task ids each); any other news of a task keeps its own.
    const news = w.notify;
    notifyGroup[k] = news && groupable(news) ? news.reason : null;
    notify[k] = news && !groupable(news) ? JSON.stringify(news) : null;
    channels[k] = news ? channelOf(news) : null;
  }
  return {
    id: p.add(id, 'text[]'),
    epoch: p.add(epoch, 'integer[]'),
    fromStatus: p.add(fromStatus, 'text[]'),
    toStatus: p.add(toStatus, 'text[]'),
    event: p.add(event, 'text[]'),
    at: p.add(at, 'bigint[]'),
    evN: p.add(evN, 'integer[]'),
    pauseGuard: p.add(pauseGuard, 'boolean[]'),
    clearLease: p.add(clearLease, 'boolean[]'),
    retries: p.add(retries, 'boolean[]'),
    notifyGroup: p.add(notifyGroup, 'text[]'),
    notify: p.add(notify, 'text[]'),
    notifyChannel: p.add(channels, 'text[]'),
    notifyListener: p.add(listenerNames(channels, names), 'text[]'),
  };
}

/**
 * The per-op array parameters of a transition batch, by column name, and the patch columns some
 * op of the batch sets.
 */
function transitionColumns(
  p: Params,
  ops: readonly TransitionWrite[],
  entries: readonly NewEvent[][],
  channelOf: (event: WakeEvent) => string,
): { i: Record<string, string>; written: typeof PATCH_COLUMNS } {
  // Most ops of a batch announce on one channel: its listener's name is hashed once.
  const names = new Map<string, string>();
  const cols = new BatchColumns(p, ops.length);
  const i = baseColumns(cols, ops, entries, channelOf, names);
  // A child's end: its parent, the signal's name (also its idempotency key, and as JSON for the
  // parent's log entry), and the channel that wakes the parent's workers.
  if (ops.some((w) => w.parentSignal)) {
    const col = <T>(f: (w: TransitionWrite, k: number) => T, type: string): string => cols.add(ops.map(f), `${type}[]`);
    const sigChannels = ops.map((w) => (w.parentSignal ? channelOf(parentSignalNotify(w.parentSignal)) : null));
    i.sigParent = col((w) => w.parentSignal?.taskId ?? null, 'text');
    i.sigName = col((w) => w.parentSignal?.name ?? null, 'text');
    i.sigNameJson = col((w) => (w.parentSignal ? JSON.stringify(w.parentSignal.name) : null), 'text');
    i.sigChannel = cols.add(sigChannels, 'text[]');
    i.sigListener = cols.add(listenerNames(sigChannels, names), 'text[]');
  }
  // Per column a patch may write (the task-column table) and some op of the batch sets: whether
  // each op sets it, and the value (a column no op sets is not in the statement).
  const written: Array<(typeof PATCH_COLUMNS)[number]> = [];
  const used = patchColumnsSet(ops);
  for (const c of PATCH_COLUMNS) {
    if (!used.has(c.field)) continue;
    const sets = new Array<boolean>(ops.length);
    for (let k = 0; k < ops.length; k++) sets[k] = setsField(ops[k] as TransitionWrite, c.field);
    written.push(c);
    const values = new Array<unknown>(ops.length);
    for (let k = 0; k < ops.length; k++) values[k] = sets[k] ? patchValue(c, (ops[k] as TransitionWrite).set) : null;
    i[`set_${c.column}`] = cols.add(sets, 'boolean[]');
    i[`v_${c.column}`] = cols.add(values, `${c.pg}[]`);
  }
  return { i, written };
}

/**
 * What the batch returns of each updated task (by {@link BatchAnswer}) and the op's place, not the
 * columns the statement carried for its own use (a wake-up's payload, the log's numbers), which
 * the driver would parse for every task of every batch.
 */
const OUT = { row: TASK_COLUMNS.map((c) => `upd.${c.column}`).join(', '), head: HEAD_SQL('upd'), end: END_SQL('upd') };

/** What a batch answers of each task: the least that covers every op's `answer` (see `TransitionWrite.answer`). */
export type BatchAnswer = 'row' | 'head' | 'end';
function answerOf(ops: readonly TransitionWrite[]): BatchAnswer {
  if (ops.some((op) => op.answer === undefined)) return 'row';
  return ops.some((op) => op.answer === 'end') ? 'end' : 'head';
}

/**
 * Epoch-guarded transitions of distinct tasks in one statement; returns the updated rows (with
 * `ord`), or their heads, or their ends, when every op asks for no more (`answer`).
 */
export function transitionBatchSql(t: Tables, ops: readonly TransitionWrite[], channelOf: (event: WakeEvent) => string): { text: string; values: unknown[]; answer: BatchAnswer } {
  const p = new Params();
  const answer = answerOf(ops);
  // Every op's log entries; those carried by journal rows are not written to `events`: their place goes to the row.
  const entries = ops.map(transitionWriteEntries);
  const ev = entryParams(p, entries);
  const { i, written } = transitionColumns(p, ops, entries, channelOf);
  const signals = 'sigParent' in i;
  // `ord` (1-based) is the op's position in `ops`, from unnest's ORDINALITY.
  const names = Object.keys(i);
  const sets = written.map((c) => `${c.column} = CASE WHEN c.set_${c.column} THEN c.v_${c.column} ELSE t.${c.column} END`).join(',\n        ');
  const text = `WITH i AS (
      SELECT * FROM unnest(${names.map((k) => i[k]).join(', ')}) WITH ORDINALITY AS i(${names.join(', ')}, ord)
    ), ${signals ? lockWithParents(t) : lockTasks(t)}, upd AS (
      UPDATE ${t.tasks} AS t SET status = c.toStatus, version = t.version + 1, updated_at = c.at,${sets ? `\n        ${sets},` : ''}
        lease_owner = CASE WHEN c.clearLease THEN NULL ELSE t.lease_owner END,
        lease_expires_at = CASE WHEN c.clearLease THEN NULL ELSE t.lease_expires_at END,
        retries = t.retries + CASE WHEN c.retries THEN 1 ELSE 0 END
      FROM cur c WHERE t.id = c.id
      RETURNING t.*, c.ord AS batch_ord, c.notify AS batch_notify, c.notifyGroup AS batch_group, c.notifyChannel AS batch_channel,
        c.notifyListener AS batch_listener, c.at AS ev_at, c.evN AS ev_n${signals ? ', c.sigParent AS sig_parent, c.sigName AS sig_name, c.sigNameJson AS sig_name_json, c.sigChannel AS sig_channel, c.sigListener AS sig_listener' : ''}
    )${signals ? parentSignalsCte(t) : ''}, ${writeHeadsSql(t, 'hd', headRows(signals))}, log AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT hd.id, hd.event_seq - hd.n + e.j, hd.ev_at, e.type, e.kind, e.actor, e.data
      FROM unnest(${ev.op}, ${ev.j}, ${ev.type}, ${ev.kind}, ${ev.actor}, ${ev.data}) AS e(op, j, type, kind, actor, data)
      JOIN hd ON hd.batch_ord = e.op
    )${journalCte(t, p, ops, entries)}${signals ? parentLogCte(t) : ''}, nt AS (
      SELECT batch_channel, batch_listener, batch_group, id, (row_number() OVER (PARTITION BY batch_channel, batch_group ORDER BY id) - 1) / ${GROUP_IDS} AS chunk
      FROM (SELECT batch_channel, batch_listener, batch_group, id FROM upd WHERE batch_group IS NOT NULL${
        signals
          ? `
        UNION ALL SELECT DISTINCT ON (task_id) channel, listener, 'task', task_id FROM sj`
          : ''
      }) n
    ), sent AS (
      SELECT ${notifySql('batch_channel', "json_build_object('reason', batch_group, 'taskId', '*', 'taskIds', json_agg(id))::text", 'batch_listener')} AS sent
      FROM nt GROUP BY batch_channel, batch_listener, batch_group, chunk
    )
    SELECT ${OUT[answer]}, upd.batch_ord, ${notifySql('batch_channel', 'batch_notify', 'batch_listener')} AS notified, (SELECT count(*) FROM sent) AS notified_batch FROM upd`;
  return { text, values: p.values, answer };
}

/** `cur`: the batch's tasks, each locked (in id order) and kept if its guard holds on the newest row version. */
function lockTasks(t: Tables): string {
  return `cur AS (
      SELECT i.*, t.status AS cur_status, t.epoch AS cur_epoch
      FROM (SELECT * FROM i ORDER BY id COLLATE "C") i CROSS JOIN LATERAL (${lockById(t, 'i.id', 'UPDATE')}) t
      WHERE t.epoch = i.epoch AND t.status = i.fromStatus AND (i.pauseGuard IS NULL OR t.pause_requested = i.pauseGuard)
    )`;
}

/**
 * With children's ends: `lk` locks the batch's tasks and their parents together, all before any
 * update and in one pass in id order, as the heartbeat and every multi-row writer take their locks
 * (a parent's id sorts before its children's: locked child first, a heartbeat holding the parent
 * and waiting for the child deadlocked with it); `cur` keeps the tasks whose guard holds.
 */
function lockWithParents(t: Tables): string {
  return `lk AS MATERIALIZED (
      ${lockEachInIdOrder(t, '(SELECT id FROM i UNION ALL SELECT sigParent FROM i WHERE sigParent IS NOT NULL) u')}
    ), cur AS (
      SELECT i.*, k.status AS cur_status, k.epoch AS cur_epoch FROM i JOIN lk k ON k.id = i.id
      WHERE k.epoch = i.epoch AND k.status = i.fromStatus AND (i.pauseGuard IS NULL OR k.pause_requested = i.pauseGuard)
    )`;
}

/**
 * The signals of the batch's finished children to their parents, written as `insertSignal` writes
 * one (see signals.ts), for the children whose update happened: `ps` the signals, their payload
 * (the child's status, output and error) read from the updated row. Each parent was locked by `lk`
 * (see {@link lockWithParents}) before the signals are written, so that a parent's transition that
 * sets `wait_events` either committed before (then `pu` reads its `wait_events`: an UPDATE sees the
 * newest row version of a row it waited for) or sees the signal; a parent that no longer exists
 * gets none. `sig` the new signals (a name already recorded keeps its row and writes
 * nothing), `sj` with their children; `pu` per parent with new signals, made due (at the latest of
 * them it waits for) if it waits for one of them; its head's log counter is then bumped by their
 * number (`hd`, with the batch's own heads) and `plog` appends their `signal:received` entries.
 *
 * `sj` finds each new signal's child in a JSON object keyed by parent and name (`pm`, built once
 * from `ps`), and `plog` each parent's counter in one built from `hd` (`hm`), instead of joining
 * two CTEs: the planner estimates one row for each and would compare every signal with every row
 * of the other (see heads.ts, {@link writeHeadsSql}). Each object is a MATERIALIZED CTE of one
 * row: as a subquery beside a row source the planner expects to be one row, it would be rebuilt
 * for every signal. `pu` reads each parent's own signals from `sg`'s arrays, not from `sig`.
 */
function parentSignalsCte(t: Tables): string {
  return `, ps AS (
      SELECT id AS child_id, sig_parent AS parent_id, sig_name AS name, sig_name_json AS name_json, sig_channel AS channel, sig_listener AS listener, ev_at AS at,
        '{"status":' || to_json(status)::text || ',"output":' || coalesce(output, 'null') || ',"error":' || coalesce(error, 'null') || '}' AS payload
      FROM upd WHERE sig_parent IS NOT NULL
    ), sig AS (
      INSERT INTO ${t.signals} AS s (task_id, name, payload, idempotency_key, created_at)
      SELECT ps.parent_id, ps.name, ps.payload, ps.name, ps.at FROM ps JOIN lk ON lk.id = ps.parent_id ORDER BY ps.parent_id, ps.child_id
      ON CONFLICT (task_id, idempotency_key) DO NOTHING
      RETURNING s.id, s.task_id, s.name, s.payload, s.created_at
    ), pm AS MATERIALIZED (
      SELECT jsonb_object_agg(jsonb_build_array(parent_id, name)::text, jsonb_build_array(child_id, name_json, channel, listener)) AS m FROM ps
    ), sj AS (
      SELECT sig.*, x ->> 0 AS child_id, x ->> 1 AS name_json, x ->> 2 AS channel, x ->> 3 AS listener
      FROM sig CROSS JOIN pm CROSS JOIN LATERAL (SELECT pm.m -> jsonb_build_array(sig.task_id, sig.name)::text AS x) l
    ), sg AS (
      SELECT task_id, count(*)::int AS n, array_agg(name) AS names, array_agg(created_at) AS ats FROM sig GROUP BY task_id
    ), pu AS (
      UPDATE ${t.tasks} AS t SET
        run_at = coalesce((SELECT max(a.at) FROM unnest(sg.names, sg.ats) AS a(name, at) WHERE strpos(t.wait_events, '|' || a.name || '|') > 0), t.run_at)
      FROM sg WHERE t.id = sg.task_id
      RETURNING t.id, sg.n
    )`;
}

/**
 * The heads the batch writes: its tasks' (their new status, and their entries, with the op's
 * position and time for those entries), and with children's ends their parents' (the signals' entries).
 */
function headRows(signals: boolean): string {
  const parents = signals ? ' UNION ALL SELECT id, NULL::text, NULL::integer, NULL::text, n, NULL::bigint, NULL::bigint FROM pu' : '';
  return `(SELECT id, status, epoch, lease_owner, ev_n AS n, batch_ord, ev_at FROM upd${parents}) r`;
}

/** `plog`: the parents' `signal:received` entries, numbered below their heads' new counters in signal id order. */
function parentLogCte(t: Tables): string {
  return `, hm AS MATERIALIZED (
      SELECT jsonb_object_agg(id, event_seq - n) AS m FROM hd WHERE batch_ord IS NULL
    ), plog AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT sj.task_id, (hm.m ->> sj.task_id)::int + row_number() OVER (PARTITION BY sj.task_id ORDER BY sj.id), sj.created_at, 'signal:received', 'system', 'task:' || sj.child_id,
        '{"signalId":' || sj.id::text || ',"name":' || sj.name_json || ',"payload":' || sj.payload || ',"idempotencyKey":' || sj.name_json || '}'
      FROM sj CROSS JOIN hm
    )`;
}

/**
 * The journal rows carried by batched transitions, written only for tasks whose update happened;
 * a row that carries its log entry takes that entry's seq (its place among the op's entries).
 * (Batched transitions are ends of runs: their rows are new results and waits, never a row that
 * already carries an entry, so nothing needs to be kept from the rows they overwrite.)
 */
function journalCte(t: Tables, p: Params, ops: readonly TransitionWrite[], entries: readonly NewEvent[][]): string {
  const last = new Map<string, { step: StepRow; place: number | null }>();
  ops.forEach((op, k) => {
    for (const step of op.steps ?? []) {
      const j = (entries[k] as NewEvent[]).findIndex((e) => e.carriedBy === step.seq);
      last.set(`${step.taskId}/${step.seq}`, { step, place: j < 0 ? null : j + 1 });
    }
  });
  const rows = [...last.values()];
  if (!rows.length) return '';
  const col = new BatchColumns(p, rows.length);
  const columns = stepColumns(
    col,
    rows.map((r) => r.step),
  );
  const place = col.add(
    rows.map((r) => r.place),
    'integer[]',
  );
  return `, journal AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
      SELECT ${STEP_COLUMNS.map((c) => `j.${c}`).join(', ')}, hd.event_seq - hd.n + j.place
      FROM unnest(${columns.join(', ')}, ${place}) AS j(${STEP_COLUMNS.join(', ')}, place) JOIN hd ON hd.id = j.task_id AND hd.batch_ord IS NOT NULL
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
    )`;
}
