/**
 * @module postgres/batch-sql
 * Internal: not part of the public API (the package exports only its index modules).
 * Group commit on PostgreSQL: many workers' writes in one statement each, so that a batch costs
 * one round trip and one commit whatever its size.
 *
 * - Step checkpoints: one multi-row `INSERT … SELECT FROM unnest(…)`, each row written only if
 *   its task, locked `FOR NO KEY UPDATE`, still has the writer's epoch and a leased status (the
 *   fence, per task), with one log entry per row written (or the row carries it), and for a row
 *   that consumes a signal the signal marked consumed and a `signal:consumed` entry after it. Each
 *   fenced task's log counter is bumped by the numbers its rows take in the batch; its entries take
 *   the numbers below the new value in batch order (see `appendFence` in sql-text.ts for why this
 *   is safe under concurrent writers).
 * - End-of-run transitions (epoch-guarded, without signals, deletions or an event wait): one
 *   multi-row `UPDATE … FROM unnest(…)` over the task rows, locked `FOR UPDATE`, whose status,
 *   epoch and pause request match, plus their log entries (numbered from the counter the same
 *   UPDATE bumps) and the journal rows they carry (for the tasks whose update happened).
 *
 * Each task row is found by its primary key, one lookup per op ({@link lockById}), so a batch costs
 * the same on a table of a thousand tasks or of millions. Multi-row lockers take their row locks in
 * id order (the ops sorted by id, in the C collation of the key), as the heartbeat does, so two of
 * them never deadlock.
 */
import { STEP_COLUMNS, stepColumnArrays } from '../rows.ts';
import { journalCarries, signalConsumedEntry, stepEntry, stepEntryAt, transitionWriteEntries } from '../log-entries.ts';
import type { NewEvent, StepRow, StepWrite, TransitionWrite, WakeEvent } from '../store.ts';
import { PATCH_COLUMNS, patchValue } from '../task-columns.ts';
import { listenerName, notifySql } from './listen.ts';
import { LEASED_SQL, Params, STEP_TYPES, STEP_UPSERT_LOGGED_SET, carriesSql, lockById, type Tables } from './sql-text.ts';

/**
 * The rows of a step batch. The last write of a (task, seq) wins, as a sequence of upserts would
 * (an INSERT … ON CONFLICT may not touch one row twice; the caller sends a write that consumes a
 * signal here only when no other write of the batch has its position); a row of another task than
 * its writer's is refused here (`rowOf` 0). Each row takes one log number, two when it consumes a
 * signal (its step's entry, then the consumption's). The rows of a task and epoch are accepted or
 * refused together; a row's place is the last of its numbers counted in the group (1, 2, …), so
 * its first entry takes seq (new counter - numbers of the group + place - width + 1). In one pass,
 * keyed by task id: a batch holds one row of most tasks.
 */
/** The log numbers a row takes: its step's entry (or the row, which carries it), and a consumption's. */
const widthOf = (op: StepWrite): number => (op.consume ? 2 : 1);

function batchRows(ops: readonly StepWrite[]): { rows: StepWrite[]; rowOf: number[]; places: number[] } {
  const rows: StepWrite[] = [];
  const rowOf = new Array<number>(ops.length);
  // Task id → its row, or (once it has rows at several positions) position → row.
  const index = new Map<string, number | Map<number, number>>();
  let several = false;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as StepWrite;
    if (op.step.taskId !== op.taskId) {
      rowOf[i] = 0;
      continue;
    }
    const at = index.get(op.taskId);
    if (at === undefined) {
      index.set(op.taskId, rows.length);
      rows.push(op);
      rowOf[i] = rows.length;
      continue;
    }
    let bySeq: Map<number, number>;
    if (typeof at === 'number') {
      bySeq = new Map([[(rows[at] as StepWrite).step.seq, at]]);
      index.set(op.taskId, bySeq);
    } else bySeq = at;
    const r = bySeq.get(op.step.seq);
    if (r === undefined) {
      several = true;
      bySeq.set(op.step.seq, rows.length);
      rows.push(op);
      rowOf[i] = rows.length;
    } else {
      rows[r] = op;
      rowOf[i] = r + 1;
    }
  }
  const places = rows.map((op) => widthOf(op));
  if (several || rows.some((op) => op.consume)) {
    const counts = new Map<string, number>();
    rows.forEach((op, r) => {
      const key = `${op.taskId}\u0000${op.epoch}`;
      const k = (counts.get(key) ?? 0) + widthOf(op);
      counts.set(key, k);
      places[r] = k;
    });
  }
  return { rows, rowOf, places };
}

/**
 * The fenced checkpoints of `ops`, with the signals some of them consume (each marked consumed, with
 * a `signal:consumed` entry after its step's, only if its row was accepted). Returns the statement
 * and, per op, the place (1-based) of its row among the statement's rows, or 0 for an op refused
 * here; the statement returns the places of the rows it accepted (`ord`).
 */
export function stepBatchSql(t: Tables, ops: readonly StepWrite[]): { text: string; values: unknown[]; rowOf: number[] } {
  const { rows, rowOf, places } = batchRows(ops);
  const p = new Params();
  const columns = stepColumns(
    p,
    rows.map((op) => op.step),
  );
  const n = rows.length;
  const fenceEpochs = new Array<number>(n);
  const evAts = new Array<number | null>(n);
  const evTypes = new Array<string>(n);
  const evDatas = new Array<string | null>(n);
  for (let r = 0; r < n; r++) {
    const op = rows[r] as StepWrite;
    fenceEpochs[r] = op.epoch;
    evAts[r] = stepEntryAt(op.step);
    evTypes[r] = `step:${op.step.status}`;
    // A row that carries its entry has no entry of its own to write: no JSON is built for it.
    evDatas[r] = journalCarries(op.step) ? null : stepEntry('worker', '', op.step).data;
  }
  const fence = p.add(fenceEpochs, 'integer[]');
  const evAt = p.add(evAts, 'bigint[]');
  const evType = p.add(evTypes, 'text[]');
  const evData = p.add(evDatas, 'text[]');
  const place = p.add(places, 'integer[]');
  // Writes that consume a signal add their columns (the others' statement stays as it was).
  const consuming = rows.some((op) => op.consume);
  const extra = consuming ? consumeColumns(p, rows) : [];
  // g: log numbers per task and epoch; l: those tasks locked in id order (an UPDATE … FROM a sorted
  // list does not lock in that order: two batches sharing tasks deadlocked), still leased at the
  // epoch; u: their log counters bumped by those numbers; a: the accepted rows, each with its first
  // entry's seq (in batch order, below the task's new counter), read by the inserts (and by the
  // marking of the consumed signals, only for accepted rows). (One join, on keys the
  // planner can hash: a filter on the unnested rows would make it expect one row and loop.) Every
  // row of `a` is written (the upsert updates a row that exists), so `a` is what was accepted.
  const text = `WITH i AS (
      SELECT * FROM unnest(${[...columns, fence, evAt, evType, evData, place, ...extra].join(', ')}) WITH ORDINALITY
        AS i(${STEP_COLUMNS.join(', ')}, fence_epoch, ev_at, ev_type, ev_data, place${consuming ? ', width, consume_id, consume_seq, consume_data' : ''}, ord)
    ), g AS (
      SELECT task_id, fence_epoch, ${consuming ? 'sum(width)::int' : 'count(*)::int'} AS n FROM i GROUP BY task_id, fence_epoch
    ), l AS (
      SELECT g.task_id, g.n FROM (SELECT * FROM g ORDER BY task_id COLLATE "C") g
      CROSS JOIN LATERAL (${lockById(t, 'g.task_id', 'NO KEY UPDATE')}) k
      WHERE k.epoch = g.fence_epoch AND k.status IN (${LEASED_SQL})
    ), u AS (
      UPDATE ${t.tasks} AS t SET event_seq = t.event_seq + l.n FROM l WHERE t.id = l.task_id
      RETURNING t.id, t.epoch, t.event_seq, t.lease_owner, l.n
    ), a AS (
      SELECT i.*, u.event_seq - u.n + i.place${consuming ? ' - i.width + 1' : ''} AS ev_seq, coalesce(u.lease_owner, 'unknown') AS ev_actor
      FROM i JOIN u ON u.id = i.task_id AND u.epoch = i.fence_epoch
    ), ins AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
      SELECT ${STEP_COLUMNS.map((c) => `a.${c}`).join(', ')}, CASE WHEN ${carriesSql('a.status')} THEN a.ev_seq END FROM a
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
    ), ev AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT task_id, ev_seq, ev_at, ev_type, 'worker', ev_actor, ev_data FROM a WHERE NOT ${carriesSql('a.status')}${
        consuming
          ? `
      UNION ALL
      SELECT task_id, ev_seq + 1, ev_at, 'signal:consumed', 'worker', ev_actor, consume_data FROM a WHERE consume_id IS NOT NULL
    ), consumed AS (
      UPDATE ${t.signals} AS s SET consumed_seq = a.consume_seq FROM a WHERE s.id = a.consume_id AND s.consumed_seq IS NULL`
          : ''
      }
    )
    SELECT ord FROM a`;
  return { text, values: p.values, rowOf };
}

/** The columns of a batch with signals to consume: each row's log numbers, the signal, its position, the consumption's entry. */
function consumeColumns(p: Params, rows: readonly StepWrite[]): string[] {
  return [
    p.add(rows.map(widthOf), 'integer[]'),
    p.add(
      rows.map((op) => op.consume?.signalId ?? null),
      'bigint[]',
    ),
    p.add(
      rows.map((op) => op.consume?.seq ?? null),
      'integer[]',
    ),
    p.add(
      rows.map((op) => (op.consume ? signalConsumedEntry('worker', '', op.consume).data : null)),
      'text[]',
    ),
  ];
}

/** One array parameter per journal column. */
function stepColumns(p: Params, rows: readonly StepRow[]): string[] {
  return stepColumnArrays(rows).map((values, c) => p.add(values, `${STEP_TYPES[c]}[]`));
}

/** Task ids in one grouped notification: well under PostgreSQL's 8,000-byte payload limit. */
const GROUP_IDS = 200;

/** News that many tasks can share one notification for: finished, or runnable again. */
function groupable(e: WakeEvent): boolean {
  return e.reason === 'settled' || e.reason === 'task';
}

/** Whether a transition can go into {@link transitionBatchSql}. */
export function isBatchableTransition(w: TransitionWrite): boolean {
  return (
    'epoch' in w.guard && w.from.length === 1 && !w.deleteSteps?.length && !w.consume?.length && !w.set.waitEvents?.length && !w.set.expireLease && !w.set.incrementEpoch && !w.parentSignal
  );
}

/** Every op's log entries, flattened, as array parameters: op position (1-based, as `ord`), place in the op's entries. */
function entryParams(p: Params, entries: readonly NewEvent[][]): Record<'op' | 'j' | 'type' | 'kind' | 'actor' | 'data', string> {
  const flat = entries.flatMap((list, k) => list.map((e, j) => ({ op: k + 1, j: j + 1, e }))).filter((x) => x.e.carriedBy === undefined);
  return {
    op: p.add(
      flat.map((x) => x.op),
      'integer[]',
    ),
    j: p.add(
      flat.map((x) => x.j),
      'integer[]',
    ),
    type: p.add(
      flat.map((x) => x.e.type),
      'text[]',
    ),
    kind: p.add(
      flat.map((x) => x.e.actorKind),
      'text[]',
    ),
    actor: p.add(
      flat.map((x) => x.e.actorId),
      'text[]',
    ),
    data: p.add(
      flat.map((x) => x.e.data),
      'text[]',
    ),
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
  const col = <T>(f: (w: TransitionWrite, k: number) => T, type: string): string => p.add(ops.map(f), `${type}[]`);
  const has =
    (field: string) =>
    (w: TransitionWrite): boolean =>
      field in w.set && (w.set as Record<string, unknown>)[field] !== undefined;
  // Most ops of a batch announce on one channel: its listener's name is hashed once.
  const channels = ops.map((w) => (w.notify ? channelOf(w.notify) : null));
  const listeners = new Map<string, string>();
  const listenerOf = (ch: string): string => listeners.get(ch) ?? (listeners.set(ch, listenerName(ch)).get(ch) as string);
  const i: Record<string, string> = {
    id: col((w) => w.taskId, 'text'),
    epoch: col((w) => ('epoch' in w.guard ? w.guard.epoch : null), 'integer'),
    fromStatus: col((w) => w.from[0], 'text'),
    toStatus: col((w) => w.to, 'text'),
    event: col((w) => w.event, 'text'),
    at: col((w) => w.at, 'bigint'),
    evN: col((_w, k) => (entries[k] as unknown[]).length, 'integer'),
    pauseGuard: col((w) => w.pauseRequested ?? null, 'boolean'),
    clearLease: col((w) => w.set.clearLease === true, 'boolean'),
    retries: col((w) => w.set.incrementRetries === true, 'boolean'),
    // Finished tasks and tasks handed back go out as one notification per channel and reason (at
    // most GROUP_IDS task ids each); any other news of a task keeps its own.
    notifyGroup: col((w) => (w.notify && groupable(w.notify) ? w.notify.reason : null), 'text'),
    notify: col((w) => (w.notify && !groupable(w.notify) ? JSON.stringify(w.notify) : null), 'text'),
    notifyChannel: p.add(channels, 'text[]'),
    notifyListener: p.add(
      channels.map((ch) => (ch === null ? null : listenerOf(ch))),
      'text[]',
    ),
  };
  // Per column a patch may write (the task-column table) and some op of the batch sets: whether
  // each op sets it, and the value (a column no op sets is not in the statement).
  const written = PATCH_COLUMNS.filter((c) => ops.some(has(c.field)));
  for (const c of written) {
    const sets = has(c.field);
    i[`set_${c.column}`] = col(sets, 'boolean');
    i[`v_${c.column}`] = col((w) => (sets(w) ? patchValue(c, w.set) : null), c.pg);
  }
  return { i, written };
}

/** Epoch-guarded transitions of distinct tasks in one statement; returns the updated rows (with `ord`). */
export function transitionBatchSql(t: Tables, ops: readonly TransitionWrite[], channelOf: (event: WakeEvent) => string): { text: string; values: unknown[] } {
  const p = new Params();
  // Every op's log entries; those carried by journal rows are not written to `events`: their place goes to the row.
  const entries = ops.map(transitionWriteEntries);
  const ev = entryParams(p, entries);
  const { i, written } = transitionColumns(p, ops, entries, channelOf);
  // `ord` (1-based) is the op's position in `ops`, from unnest's ORDINALITY.
  const names = Object.keys(i);
  const sets = written.map((c) => `${c.column} = CASE WHEN c.set_${c.column} THEN c.v_${c.column} ELSE t.${c.column} END`).join(',\n        ');
  const text = `WITH i AS (
      SELECT * FROM unnest(${names.map((k) => i[k]).join(', ')}) WITH ORDINALITY AS i(${names.join(', ')}, ord)
    ), cur AS (
      SELECT i.*, t.status AS cur_status, t.epoch AS cur_epoch
      FROM (SELECT * FROM i ORDER BY id COLLATE "C") i CROSS JOIN LATERAL (${lockById(t, 'i.id', 'UPDATE')}) t
      WHERE t.epoch = i.epoch AND t.status = i.fromStatus AND (i.pauseGuard IS NULL OR t.pause_requested = i.pauseGuard)
    ), upd AS (
      UPDATE ${t.tasks} AS t SET status = c.toStatus, version = t.version + 1, updated_at = c.at,${sets ? `\n        ${sets},` : ''}
        lease_owner = CASE WHEN c.clearLease THEN NULL ELSE t.lease_owner END,
        lease_expires_at = CASE WHEN c.clearLease THEN NULL ELSE t.lease_expires_at END,
        retries = t.retries + CASE WHEN c.retries THEN 1 ELSE 0 END,
        event_seq = t.event_seq + c.evN
      FROM cur c WHERE t.id = c.id
      RETURNING t.*, c.ord AS batch_ord, c.notify AS batch_notify, c.notifyGroup AS batch_group, c.notifyChannel AS batch_channel,
        c.notifyListener AS batch_listener, c.at AS ev_at, c.evN AS ev_n
    ), log AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT upd.id, upd.event_seq - upd.ev_n + e.j, upd.ev_at, e.type, e.kind, e.actor, e.data
      FROM unnest(${ev.op}, ${ev.j}, ${ev.type}, ${ev.kind}, ${ev.actor}, ${ev.data}) AS e(op, j, type, kind, actor, data)
      JOIN upd ON upd.batch_ord = e.op
    )${journalCte(t, p, ops, entries)}, nt AS (
      SELECT batch_channel, batch_listener, batch_group, id, (row_number() OVER (PARTITION BY batch_channel, batch_group ORDER BY id) - 1) / ${GROUP_IDS} AS chunk
      FROM upd WHERE batch_group IS NOT NULL
    ), sent AS (
      SELECT ${notifySql('batch_channel', "json_build_object('reason', batch_group, 'taskId', '*', 'taskIds', json_agg(id))::text", 'batch_listener')} AS sent
      FROM nt GROUP BY batch_channel, batch_listener, batch_group, chunk
    )
    SELECT upd.*, ${notifySql('batch_channel', 'batch_notify', 'batch_listener')} AS notified, (SELECT count(*) FROM sent) AS notified_batch FROM upd`;
  return { text, values: p.values };
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
  const columns = stepColumns(
    p,
    rows.map((r) => r.step),
  );
  const place = p.add(
    rows.map((r) => r.place),
    'integer[]',
  );
  return `, journal AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq)
      SELECT ${STEP_COLUMNS.map((c) => `j.${c}`).join(', ')}, upd.event_seq - upd.ev_n + j.place
      FROM unnest(${columns.join(', ')}, ${place}) AS j(${STEP_COLUMNS.join(', ')}, place) JOIN upd ON upd.id = j.task_id
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
    )`;
}
