/**
 * @module postgres/batch-sql
 * Internal: not part of the public API (the package exports only its index modules).
 * Group commit on PostgreSQL: many workers' writes in one statement each, so that a batch costs
 * one round trip and one commit whatever its size.
 *
 * - Step checkpoints: one multi-row `INSERT … SELECT FROM unnest(…)`, each row written only if
 *   its task's head (heads.ts), locked `FOR NO KEY UPDATE`, still has the writer's epoch and a
 *   leased status (the fence, per task), with one log entry per row written (or the row carries
 *   it), and for a row that consumes a signal the signal marked consumed and a `signal:consumed`
 *   entry after it. Each fenced task's log counter is bumped by the numbers its rows take in the
 *   batch; its entries take the numbers below the new value in batch order (see `appendFence` in
 *   heads.ts for why this is safe under concurrent writers).
 * - End-of-run transitions: see transition-batch-sql.ts.
 *
 * Each head row is found by its primary key, one lookup per op, so a batch costs
 * the same on a table of a thousand tasks or of millions. Multi-row lockers take their row locks in
 * id order (the ops sorted by id, in the C collation of the key), as the heartbeat does, so two of
 * them never deadlock.
 */
import { STEP_COLUMNS, stepColumnArrays } from '../rows.ts';
import { journalCarries, signalConsumedEntry, stepEntry, stepEntryAt } from '../log-entries.ts';
import type { StepRow, StepWrite } from '../store.ts';
import { BatchColumns, LEASED_SQL, Params, STEP_TYPES, STEP_UPSERT_LOGGED_SET, carriesSql, type Tables } from './sql-text.ts';

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
  const places = rows.map(widthOf);
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
  const n = rows.length;
  const col = new BatchColumns(p, n);
  const columns = stepColumns(
    col,
    rows.map((op) => op.step),
  );
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
  const fence = col.add(fenceEpochs, 'integer[]');
  const evAt = col.add(evAts, 'bigint[]');
  const evType = col.add(evTypes, 'text[]');
  const evData = col.add(evDatas, 'text[]');
  const place = col.add(places, 'integer[]');
  // Writes that consume a signal add their columns (the others' statement stays as it was).
  const consuming = rows.some((op) => op.consume);
  const extra = consuming ? consumeColumns(col, rows) : [];
  // g: log numbers per task and epoch; l: those tasks' heads locked in id order (an UPDATE … FROM a
  // sorted list does not lock in that order: two batches sharing tasks deadlocked), still leased at
  // the epoch; u: their log counters bumped by those numbers; a: the accepted rows, each with its first
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
      CROSS JOIN LATERAL (SELECT epoch, status FROM ${t.heads} WHERE id = g.task_id OFFSET 0 FOR NO KEY UPDATE) k
      WHERE k.epoch = g.fence_epoch AND k.status IN (${LEASED_SQL})
    ), u AS (
      UPDATE ${t.heads} AS t SET event_seq = t.event_seq + l.n FROM l WHERE t.id = l.task_id
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
function consumeColumns(p: BatchColumns, rows: readonly StepWrite[]): string[] {
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
export function stepColumns(p: BatchColumns, rows: readonly StepRow[]): string[] {
  return stepColumnArrays(rows).map((values, c) => p.add(values, `${STEP_TYPES[c]}[]`));
}
