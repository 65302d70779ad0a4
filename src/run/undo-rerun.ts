/**
 * @module run/undo-rerun
 * Internal: not part of the public API (the package exports only its index modules).
 * The first run of a re-run that undoes first. `engine.retry(id, { fromStep, compensate: true })`
 * of a succeeded task keeps its journal and marks the task (`undoFrom`: the journal position of
 * `fromStep`). The run that claims it:
 * 1. fails at its start with a {@link RerunUndoError}, as a task failed from outside does
 *    (`failed-outside.ts`): its code replays what it recorded, registering the compensations of the
 *    steps it completed, and every new call is refused;
 * 2. its cleanup runs only the compensations of the steps at `undoFrom` or later, newest first
 *    (`cleanup.ts`): each is a step `compensate:<step>` of the journal, so a run resumed after a
 *    crash hands back those that completed and runs the rest;
 * 3. when they have all completed, the run ends with `release`: the steps from `undoFrom` on and the
 *    cleanup's rows are forgotten, the undone steps are counted in `redo` (run again, they take new
 *    idempotency keys: `redo.ts`) and the task is due again, to run from `fromStep` as any
 *    re-run does.
 *
 * A compensation that fails for good fails the task with a CompensationFailedError whose cause is
 * the RerunUndoError; the journal keeps what was done and undone. A cancel during the run is a
 * cancel: its cleanup undoes every completed step. Code that no longer reaches every recorded call
 * cannot register their compensations: after undoing those it reached, the task fails with a
 * NonDeterminismError naming the first call it did not reach.
 */
import { NonDeterminismError, RerunUndoError } from '../errors.ts';
import type { StepRow, TaskRow } from '../store.ts';
import { countRedo } from './redo.ts';
import { encodeError } from '../serialize.ts';
import type { EndPlan } from './outcome.ts';
import type { RunState } from './state.ts';
import type { Compensation } from './cleanup-scope.ts';

/** A re-run's undo, as its run carries it out. */
export interface UndoRerun {
  /** The journal position of the step the re-run runs from. */
  readonly fromSeq: number;
  readonly fromStep: string;
  /** What the run fails with at its start; its state carries it while the run undoes. */
  readonly error: RerunUndoError;
  /** The ids of the steps at `fromSeq` or later (`book`, `book#2`): the compensations to run. */
  readonly stepIds: ReadonlySet<string>;
}

/** The undo a claimed task asks its run for, or null (a task being cancelled is not undone: its cancel undoes all). */
export function undoOf(task: Pick<TaskRow, 'id' | 'status' | 'undoFrom'>, journal: ReadonlyMap<number, StepRow>): UndoRerun | null {
  if (task.undoFrom === null || task.status !== 'running') return null;
  const fromSeq = task.undoFrom;
  const fromStep = journal.get(fromSeq)?.name ?? `position ${fromSeq}`;
  const stepIds = new Set<string>();
  for (const [seq, row] of journal) if (seq >= fromSeq && row.kind === 'step') stepIds.add(row.name);
  return { fromSeq, fromStep, error: new RerunUndoError(task.id, fromStep), stepIds };
}

/** What starting an undo needs of a run. */
export interface UndoStart {
  readonly undo: UndoRerun | null;
  fail(error: Error): Error;
  abortRun(reason: unknown): void;
}

/** Fails the run (and fires its signal) now, returning true, when it is a re-run's undo. */
export function startUndo(run: UndoStart): boolean {
  if (!run.undo) return false;
  run.fail(run.undo.error);
  run.abortRun(run.undo.error);
  return true;
}

/** Whether the run stands as its undo left it: failed by the undo's error, and nothing since (a cancel, a lost lease, an illegal call). */
export function undoing(undo: UndoRerun | null, state: RunState): undo is UndoRerun {
  return undo !== null && state.kind === 'failed' && state.error === undo.error && state.halt === null;
}

/** The compensations an undo runs: those of the steps it forgets. */
export function compensationsToUndo(undo: UndoRerun, compensations: readonly Compensation[]): Compensation[] {
  return compensations.filter((c) => undo.stepIds.has(c.stepId));
}

/** What the end of an undo whose compensations all completed needs of the run. */
export interface UndoEndRun {
  readonly taskId: string;
  readonly task: Pick<TaskRow, 'redo'>;
  readonly compensations: readonly Compensation[];
  /** How the run's messages name the task ("Task t1 (workflow "w" version 2)"). */
  readonly who: string;
}

/**
 * The last transition of an undo whose compensations all completed: back to pending with the steps
 * from `fromSeq` on forgotten (`rows`: the task's journal as it stands, cleanup rows included), or a
 * failure when the code did not reach every recorded call (`unreached`: the first it did not).
 */
export function undoEnd(undo: UndoRerun, run: UndoEndRun, rows: readonly StepRow[], unreached: StepRow | undefined): EndPlan {
  if (unreached) {
    const error = new NonDeterminismError(
      run.taskId,
      unreached.seq,
      `${run.who}: the re-run from step "${undo.fromStep}" was to undo the steps from there on, but the code no longer reaches ${unreached.kind} "${unreached.name}" at position ${unreached.seq}, so its compensation (if it has one) is unknown. The steps the code reached were undone. Undo the rest by hand, then re-run without compensate.`,
    );
    return { event: 'fail', set: { error: encodeError(error), undoFrom: null }, detail: { error: error.message } };
  }
  const undone = compensationsToUndo(undo, run.compensations)
    .map((c) => c.stepId)
    .reverse();
  const forgotten = rows.filter((s) => s.seq >= undo.fromSeq).sort((a, b) => a.seq - b.seq);
  return {
    event: 'release',
    set: { undoFrom: null, redo: countRedo(run.task.redo, undone) },
    deleteSteps: forgotten.map((s) => s.seq),
    detail: { reason: `re-run from step "${undo.fromStep}": the steps from there on were undone`, fromStep: undo.fromStep, undone, forgotten: forgotten.map((s) => s.name) },
  };
}
