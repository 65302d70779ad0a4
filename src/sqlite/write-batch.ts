/**
 * @module sqlite/write-batch
 * Internal: not part of the public API.
 * Checkpoints and transitions written together on SQLite. The hot path is one plain step result:
 * one autocommit statement when this connection knows the task's log count, else its own write
 * transaction; a batch of several writes shares one transaction (one commit, one sync).
 */
import type Database from 'better-sqlite3';
import { stepValuesOfTask } from '../rows.ts';
import { journalCarries, signalConsumedEntry, stepEntry, stepEntryAt } from '../log-entries.ts';
import type { StepWrite, WriteOp, WriteResult } from '../store.ts';
import type { SqliteContext } from './context.ts';
import { FENCED_RESULT_SQL, FENCE_STEP_SQL, HOT_STEP_SQL, INSERT_EVENT_SQL } from './sql.ts';
import { transitionNow } from './transition.ts';

type StepTx = Database.Transaction<(w: StepWrite) => boolean>;
/** The checkpoint of a plain step in its own write transaction, built once per connection (the hot path). */
const stepTxs = new WeakMap<SqliteContext, StepTx>();

/**
 * The fenced journal write: accepted only while the writer's epoch is current and the task
 * leased. A step's result is carried by its row (one row written); a wait in progress or a retry
 * due also gets an entry of its own, since the row will be written again.
 */
function stepWrite(c: SqliteContext, w: StepWrite): boolean {
  const s = w.step;
  const no = c.no(w.taskId);
  if (no === undefined || s.taskId !== w.taskId) return false;
  if (!w.consume && journalCarries(s)) {
    // A result: fence and row in one statement; the seq is taken only if the row was written.
    const seq = c.lastSeqOf(no) + 1;
    if (c.stmt(FENCED_RESULT_SQL).run(no, ...stepValuesOfTask(s), seq, no, w.taskId, w.epoch).changes !== 1) return false;
    c.lastSeqs.set(no, seq);
    return true;
  }
  const fence = c.stmt(FENCE_STEP_SQL).get(no, w.taskId, w.epoch) as { lease_owner: string | null } | undefined;
  if (!fence) return false;
  const seq = c.takeSeqs(no, 1);
  const carried = journalCarries(s);
  c.upsertStep(no, s, carried ? seq : null);
  if (!carried) {
    const entry = stepEntry('worker', fence.lease_owner ?? 'unknown', s);
    c.stmt(INSERT_EVENT_SQL).run(no, seq, stepEntryAt(s), entry.type, entry.actorKind, entry.actorId, entry.data);
  }
  if (w.consume) {
    c.consume(w.consume.signalId, w.consume.seq);
    c.append(no, stepEntryAt(s), [signalConsumedEntry('worker', fence.lease_owner ?? 'unknown', w.consume)]);
  }
  return true;
}

/**
 * A step result written by one autocommit statement (see {@link HOT_STEP_SQL}); false when it
 * was not written (not a result, the task's log count unknown here, the fence or the count
 * refused it): the caller then writes it in a transaction, which also tells the fence apart.
 */
function hotStep(c: SqliteContext, w: StepWrite): boolean {
  const s = w.step;
  if (!journalCarries(s) || s.taskId !== w.taskId) return false;
  const no = c.taskNos.get(w.taskId);
  const last = no === undefined ? undefined : c.lastSeqs.get(no);
  if (no === undefined || last === undefined) return false;
  const seq = last + 1;
  if (c.stmt(HOT_STEP_SQL).run(no, ...stepValuesOfTask(s), seq, no, w.taskId, w.epoch, no, seq).changes !== 1) return false;
  c.lastSeqs.set(no, seq);
  return true;
}

/** One plain step: the fence and the row, in one write transaction (or one statement, see {@link hotStep}). */
function oneStep(c: SqliteContext, w: StepWrite): WriteResult[] {
  try {
    c.checkFiles();
    if (hotStep(c, w)) return [true];
    let tx = stepTxs.get(c);
    if (!tx) stepTxs.set(c, (tx = c.db.transaction((s: StepWrite) => stepWrite(c, s))));
    c.seqsChecked = false;
    return [tx.immediate(w)];
  } catch (e) {
    c.lastSeqs.clear();
    throw c.storeError(e);
  } finally {
    c.seqsChecked = false;
  }
}

export function writeBatchNow(c: SqliteContext, ops: readonly WriteOp[]): WriteResult[] {
  const [only] = ops;
  if (ops.length === 1 && only?.kind === 'step' && !only.consume) return oneStep(c, only);
  return c.tx(() => ops.map((op) => (op.kind === 'step' ? stepWrite(c, op) : transitionNow(c, op))));
}
