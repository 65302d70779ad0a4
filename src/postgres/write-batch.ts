/**
 * @module postgres/write-batch
 * Internal: not part of the public API.
 * The engine's group commit on PostgreSQL: a lone plain step write (the hot path: one prepared
 * autocommit statement, on the kept connection when it is free), step checkpoints (with the signals
 * they consume) and end-of-run transitions as multi-row statements (see batch-sql.ts and transition-batch-sql.ts), and the
 * rest one by one in a transaction.
 */
import { poolOf, query, rows, run, translateError, tx, type Db, type PgContext } from './connection.ts';
import { lockInIdOrder, transition, transitionOn } from './transition.ts';
import { channelOf } from './listen.ts';
import { Params, STEP_TYPES, STEP_UPSERT_LOGGED_SET, plainStepSql, resultStepSql, sentAgainCte, type StepShape } from './sql-text.ts';
import { appendFence } from './heads.ts';
import { stepBatchSql } from './batch-sql.ts';
import { batchableTransitions, isBatchableTransition, transitionBatchSql } from './transition-batch-sql.ts';
import { STEP_COLUMNS, stepValues, toTaskRow } from '../rows.ts';
import { toTaskEnd, toTaskHead } from '../task-columns.ts';
import { journalCarries, signalConsumedEntry, stepEntry, stepEntryAt } from '../log-entries.ts';
import type { StepWrite, TransitionWrite, WakeEvent, WriteOp, WriteResult } from '../store.ts';
import { markCommitted } from '../store/journal.ts';

/**
 * Group commit: step checkpoints go into one multi-row statement, end-of-run transitions (with the
 * signals of finished children to their parents) into another (see batch-sql.ts, transition-batch-sql.ts); each op keeps
 * its own guard. Writes that need more (journal rows with
 * a transition, an event wait, two writes of one position of which one consumes a signal) run one
 * by one in a transaction.
 */
export function writeBatch(c: PgContext, ops: readonly WriteOp[]): Promise<WriteResult[]> {
  const [only] = ops;
  if (ops.length === 1 && only?.kind === 'step') {
    // The hot path of a plain step: one autocommit statement, one round trip (and as few
    // promise hops as possible: this is paid once per step of a lone run).
    try {
      return stepWrite(c, poolOf(c), only).then((accepted) => [accepted], c.translate);
    } catch (e) {
      return Promise.reject(translateError(e, c.description));
    }
  }
  return writeBatchRest(c, ops);
}

/** Everything but a lone step write (see {@link writeBatch}). */
async function writeBatchRest(c: PgContext, ops: readonly WriteOp[]): Promise<WriteResult[]> {
  if (!ops.length) return [];
  const [only] = ops;
  // A lone transition takes its own statement, except a child's end: the batch statement writes
  // it with its signal to the parent in one round trip, where the one-by-one path takes a transaction of three.
  if (ops.length === 1 && only?.kind === 'transition' && !(only.parentSignal && isBatchableTransition(only))) return [await transition(c, only)];
  return run(c, writeGrouped, c, ops);
}

/**
 * A batch of several ops: the plain step writes in one statement, the batchable transitions in
 * another, the rest one by one. Loops rather than per-call callbacks: this runs once per batch,
 * and V8 compiles a per-call closure again after each quiet spell of the worker (see resolvers.ts).
 */
async function writeGrouped(c: PgContext, ops: readonly WriteOp[]): Promise<WriteResult[]> {
  const results: WriteResult[] = new Array<WriteResult>(ops.length).fill(null);
  const stepOps: StepWrite[] = [];
  const stepAt: number[] = [];
  const candidates: Array<{ op: TransitionWrite; at: number }> = [];
  const rest: Array<{ op: WriteOp; at: number }> = [];
  const transitionTasks = new Set<string>();
  const oneByOne = tasksWrittenInOrder(ops);
  for (let at = 0; at < ops.length; at++) {
    const op = ops[at] as WriteOp;
    if (op.kind === 'step' && !oneByOne.has(op.taskId)) {
      stepOps.push(op);
      stepAt.push(at);
    } else if (op.kind === 'transition' && isBatchableTransition(op) && !transitionTasks.has(op.taskId) && !oneByOne.has(op.taskId)) {
      transitionTasks.add(op.taskId);
      candidates.push({ op, at });
    } else rest.push({ op, at });
  }
  // A child's end whose parent the batch also transitions goes one by one (see batchableTransitions).
  const { batch: transitions, rest: oneByOneEnds } = batchableTransitions(candidates);
  for (const x of oneByOneEnds) rest.push(x);
  // The step statement and the transition statement each autocommit: if a later part fails,
  // the error says which ops are written (see markCommitted), so a retry writes only the rest.
  const committed = new Map<number, WriteResult>();
  try {
    if (stepOps.length) {
      const { text, values, rowOf } = stepBatchSql(c.t, stepOps);
      const accepted = new Array<boolean>(rowOf.length + 1).fill(false);
      for (const r of await rows(c, poolOf(c), text, values)) accepted[Number(r.ord)] = true;
      for (let i = 0; i < stepOps.length; i++) {
        const at = stepAt[i] as number;
        committed.set(at, (results[at] = accepted[rowOf[i] as number] === true));
      }
    }
    if (transitions.length) {
      const transitionOps = new Array<TransitionWrite>(transitions.length);
      for (let i = 0; i < transitions.length; i++) transitionOps[i] = (transitions[i] as { op: TransitionWrite }).op;
      const { text, values, answer } = transitionBatchSql(c.t, transitionOps, channelFnOf(c));
      const decode = answer === 'head' ? toTaskHead : answer === 'end' ? toTaskEnd : toTaskRow;
      const byOrd = new Map<number, WriteResult>();
      for (const row of await rows(c, poolOf(c), text, values)) byOrd.set(Number(row.batch_ord), decode(row));
      for (let i = 0; i < transitions.length; i++) {
        const at = (transitions[i] as { at: number }).at;
        committed.set(at, (results[at] = byOrd.get(i + 1) ?? null));
      }
    }
    if (rest.length) await writeRest(c, rest, results);
  } catch (e) {
    throw markCommitted(translateError(e, c.description), committed);
  }
  return results;
}

/** Each store's channel function, made once (see {@link writeGrouped}). */
const channelFns = new WeakMap<PgContext, (event: WakeEvent) => string>();

function channelFnOf(c: PgContext): (event: WakeEvent) => string {
  let fn = channelFns.get(c);
  if (!fn) channelFns.set(c, (fn = (event: WakeEvent): string => channelOf(c, event)));
  return fn;
}

/** The ops that need more than the multi-row statements, one by one in one transaction. */
async function writeRest(c: PgContext, rest: Array<{ op: WriteOp; at: number }>, results: WriteResult[]): Promise<void> {
  // Row locks in task id order, as every multi-row writer takes them (see batch-sql.ts), so
  // that two such transactions never deadlock; each task's ops in their order in the batch.
  rest.sort((x, y) => (x.op.taskId < y.op.taskId ? -1 : x.op.taskId > y.op.taskId ? 1 : x.at - y.at));
  const out = await tx(c, async (client) => {
    // Where it writes a transition, the transaction first locks every task row it writes, then
    // their heads, each in id order (see lockInIdOrder), unless it writes nothing but transitions
    // of one task: a transition locks its row, then its head, a child's end also its parent's
    // (whose id sorts first), a checkpoint its head only, each held to the commit. Checkpoints
    // alone lock heads only, one each, in the id order of `rest`.
    const parents = rest.flatMap((x) => (x.op.kind === 'transition' && x.op.parentSignal ? [x.op.parentSignal.taskId] : []));
    const transitions = rest.some((x) => x.op.kind === 'transition');
    const several = new Set(rest.map((x) => x.op.taskId)).size > 1;
    const mixed = transitions && rest.some((x) => x.op.kind === 'step');
    if (parents.length || mixed || (transitions && several)) await lockInIdOrder(c, client, [...rest.map((x) => x.op.taskId), ...parents]);
    const r: WriteResult[] = [];
    for (const { op } of rest) r.push(op.kind === 'step' ? await stepWrite(c, client, op) : await transitionOn(c, client, op));
    return r;
  });
  rest.forEach((x, i) => (results[x.at] = out[i] as WriteResult));
}

/**
 * Tasks whose step writes must run one by one, in order: two writes of one position where one
 * consumes a signal (the multi-row statement keeps one row per position, the last write's, and
 * would drop the other's consumption or entry), and a write sent again (`StepWrite.again`: its
 * statement takes an identical row as itself, which the multi-row one does not look for).
 */
function tasksWrittenInOrder(ops: readonly WriteOp[]): Set<string> {
  const out = new Set<string>();
  for (const op of ops) if (op.kind === 'step' && op.again) out.add(op.taskId);
  let consumes = false;
  for (const op of ops) if (op.kind === 'step' && op.consume) consumes = true;
  if (!consumes) return out;
  const positions = new Map<string, { count: number; consumes: boolean }>();
  for (const op of ops) {
    if (op.kind !== 'step') continue;
    const key = `${op.taskId}\u0000${op.step.seq}`;
    const p = positions.get(key) ?? { count: 0, consumes: false };
    p.count++;
    p.consumes ||= op.consume !== undefined;
    positions.set(key, p);
    if (p.count > 1 && p.consumes) out.add(op.taskId);
  }
  return out;
}

/** The texts of the hot-path statements per store and shape (built once; prepared once per connection). */
const stepTexts = new WeakMap<PgContext, Map<string, string>>();

function stepText(c: PgContext, carried: boolean, shape: StepShape): string {
  let texts = stepTexts.get(c);
  if (!texts) stepTexts.set(c, (texts = new Map()));
  const key = `${carried ? 'result' : 'plain'}:${shape}`;
  let text = texts.get(key);
  if (text === undefined) texts.set(key, (text = carried ? resultStepSql(c.t, shape) : plainStepSql(c.t, shape)));
  return text;
}

/** SQLSTATE of a unique violation. */
const UNIQUE_VIOLATION = '23505';

/**
 * The fenced journal write, one statement (see {@link plainStepSql}); one that consumes a signal
 * also marks it, in the same statement, only if the row was accepted.
 */
export function stepWrite(c: PgContext, db: Db, w: StepWrite): Promise<boolean> {
  if (w.consume) return consumingStepWrite(c, db, w, w.consume);
  // The hot path: one statement whose text never changes (prepared once per connection); the
  // task's head is locked by the fence's UPDATE, and the row count (of the log entry) says whether
  // it was accepted.
  const values = stepValues(w.step);
  values.push(w.taskId, w.epoch);
  // A step's result is carried by its row: no entry of its own, no `events` in the statement.
  const carried = journalCarries(w.step);
  if (!carried) values.push(stepEntryAt(w.step), `step:${w.step.status}`, stepEntry('worker', '', w.step).data);
  const send = (shape: StepShape): Promise<boolean> => {
    const text = stepText(c, carried, shape);
    const onHot = db === c.pool ? c.hot.tryRun((client) => query(c, client, text, values)) : undefined;
    return (onHot ?? query(c, db, text, values)).then((r) => r.rowCount === 1);
  };
  if (w.again) return send('again');
  // Only in autocommit: inside a transaction a failed statement would abort it.
  if (!w.fresh || db !== c.pool) return send('upsert');
  // A row at the position after all (the first attempt of a retried write committed): the
  // statement failed whole, fence included; it is made again, taking an identical row as itself.
  return send('fresh').catch((e: unknown) => {
    if ((e as { code?: unknown } | null)?.code === UNIQUE_VIOLATION) return send('again');
    throw e;
  });
}

/**
 * A journal write that also marks the signal it consumed, only if the row was accepted; two
 * entries (the step's, then the consumption's), actor the lease holder.
 */
async function consumingStepWrite(c: PgContext, db: Db, w: StepWrite, consume: NonNullable<StepWrite['consume']>): Promise<boolean> {
  const t = c.t;
  const p = new Params();
  const values = stepValues(w.step).map((v, i) => p.add(v, STEP_TYPES[i] as string));
  const task = p.add(w.taskId, 'text');
  // The step's entry (place 1; carried by its row when it is a result), then the consumption's.
  const carried = journalCarries(w.step);
  const types = carried ? ['signal:consumed'] : [`step:${w.step.status}`, 'signal:consumed'];
  const data = carried ? [signalConsumedEntry('worker', '', consume).data] : [stepEntry('worker', '', w.step).data, signalConsumedEntry('worker', '', consume).data];
  const places = carried ? [2] : [1, 2];
  // Sent again (see StepWrite.again): an identical row is this write, committed with its consumption.
  const again = sentAgainCte(t, values, w.again === true);
  const text = `WITH ${again.cte}f AS (${appendFence(t, task, p.add(w.epoch, 'integer'), '2', again.unless)}
      ), ins AS (
        INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}, log_seq) SELECT ${values.join(', ')}, ${carried ? 'f.event_seq - 1' : 'NULL::integer'} FROM f
        ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_LOGGED_SET}
      ), consumed AS (
        UPDATE ${t.signals} SET consumed_seq = ${p.add(consume.seq, 'integer')}
        WHERE id = ${p.add(consume.signalId, 'bigint')} AND consumed_seq IS NULL AND EXISTS (SELECT 1 FROM f)
      ), log AS (
        INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
        SELECT ${task}, f.event_seq - 2 + e.place, ${p.add(stepEntryAt(w.step), 'bigint')}, e.type, 'worker', coalesce(f.lease_owner, 'unknown'), e.data
        FROM f, unnest(${p.add(types, 'text[]')}, ${p.add(data, 'text[]')}, ${p.add(places, 'integer[]')}) AS e(type, data, place)
      ) SELECT ((SELECT count(*) FROM f)${again.unless ? ' + (SELECT count(*) FROM d)' : ''})::int AS n`;
  const [row] = await rows(c, db, text, p.values);
  return row?.n === 1;
}
