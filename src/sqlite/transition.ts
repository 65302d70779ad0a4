/**
 * @module sqlite/transition
 * Internal: not part of the public API.
 * A status change on SQLite, inside a write transaction: the guarded UPDATE (legal source status,
 * version or epoch, pause request), the journal rows it writes or deletes (their log entries kept),
 * its log entries, the signals it consumes, and an early wake-up when a signal it waits for is here.
 */
import { encodeEvents, stepValuesOfTask, toTaskRow } from '../rows.ts';
import { transitionWriteEntries, uniqueSteps } from '../log-entries.ts';
import type { TaskRow, TransitionWrite } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { INSERT_NEW_STEP_SQL, fromList, inList } from './sql.ts';
import { insertSignalNow } from './signals.ts';
import { parentSignalWrite } from '../store-sql/parent-signal.ts';

/** The guarded UPDATE of the task row; the row, or undefined if the guard refused. */
function updateTask(c: SqliteContext, w: TransitionWrite): Raw | undefined {
  const { sets, params } = c.assignments(w.set, w.at);
  const guard = 'version' in w.guard ? 'version' : 'epoch';
  const pause = w.pauseRequested === undefined ? '' : ' AND pause_requested = ?';
  return c
    .stmt(
      `UPDATE stepwise_tasks SET status = ?, version = version + 1, updated_at = ?${sets}
     WHERE id = ? AND status IN (${fromList(w.from)}) AND ${guard} = ?${pause} RETURNING *`,
    )
    .get(w.to, w.at, ...params, w.taskId, 'version' in w.guard ? w.guard.version : w.guard.epoch, ...(pause ? [w.pauseRequested ? 1 : 0] : [])) as Raw | undefined;
}

/** The transition's journal rows and log entries (rows that carry an entry get its seq). */
function writeJournal(c: SqliteContext, no: number, w: TransitionWrite): void {
  const steps = uniqueSteps(w.steps ?? []);
  // Rows about to be deleted keep their entries in the log first (as do rows rewritten, below).
  if (w.deleteSteps?.length) {
    c.materialize(no, w.taskId, w.deleteSteps);
    c.stmt(`DELETE FROM stepwise_steps WHERE task_no = ? AND seq IN (${inList(w.deleteSteps.length)})`).run(no, ...w.deleteSteps);
  }
  const entries = transitionWriteEntries(w);
  const last = entries.length ? c.takeSeqs(no, entries.length) : 0;
  const carried = new Map<number, number>();
  entries.forEach((e, i) => e.carriedBy !== undefined && carried.set(e.carriedBy, last - entries.length + 1 + i));
  for (const step of steps) {
    const logSeq = carried.get(step.seq) ?? null;
    // Most rows are new; one that exists keeps the entry it carries in the log before it is rewritten.
    if (c.stmt(INSERT_NEW_STEP_SQL).run(no, ...stepValuesOfTask(step), logSeq).changes === 1) continue;
    c.materialize(no, w.taskId, [step.seq]);
    c.upsertStep(no, step, logSeq);
  }
  c.insertEntries(no, w.at, entries, last);
}

/** The transition, inside the caller's write transaction. */
export function transitionNow(c: SqliteContext, w: TransitionWrite): TaskRow | null {
  // The guard (legal source status, version or epoch, pause request) is the UPDATE's own WHERE.
  const row = updateTask(c, w);
  if (!row) return null;
  writeJournal(c, Number(row.no), w);
  for (const s of w.consume ?? []) c.consume(s.signalId, s.seq);
  // A child's end reaches its parent in the same transaction.
  if (w.parentSignal) insertSignalNow(c, parentSignalWrite(w.parentSignal, toTaskRow(row), w.at));
  const events = encodeEvents(w.set.waitEvents ?? null);
  if (events !== null) {
    const due = c
      .stmt(
        `UPDATE stepwise_tasks SET run_at = ? WHERE id = ? AND EXISTS
         (SELECT 1 FROM stepwise_signals WHERE task_id = ? AND consumed_seq IS NULL AND instr(?, '|' || name || '|') > 0) RETURNING *`,
      )
      .get(w.at, w.taskId, w.taskId, events) as Raw | undefined;
    if (due) return toTaskRow(due);
  }
  return toTaskRow(row);
}

export function transition(c: SqliteContext, w: TransitionWrite): TaskRow | null {
  return c.tx(() => transitionNow(c, w));
}
