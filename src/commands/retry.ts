/**
 * @module commands/retry
 * `engine.retry`: a failed task runs again from the step that failed (or from `fromStep`); a
 * succeeded or cancelled task runs again from `fromStep` (a re-run: the steps from there on are
 * forgotten, their compensations are not run, and so is its output or cancel reason). This
 * module plans the journal surgery: which calls are forgotten, which failed step is reset, what
 * the retry's log entry says. Also the refusal of a retry (a cancelled task whose cleanup failed).
 */
import { RETRY_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { ConflictError, ERROR_CODES, InvalidArgumentError } from '../errors.ts';
import { decodeError, type SerializedError } from '../serialize.ts';
import type { SignalRow, StepRow, Store, TaskPatch, TaskRow } from '../store.ts';
import { retryDeadline, taskDeadline } from '../failure/deadline.ts';
import { calledAfterReceiving, consequencesOf, forgetUndone, planRetryFrom, undoneSteps } from '../failure/retry-from.ts';
import { countRedo } from '../run/redo.ts';
import { isCleanupSeq } from '../run/cleanup-scope.ts';
import { FIRST_DRIFT, resolveFromStep } from '../replay/drift.ts';
import { isFinished } from '../lifecycle.ts';
import { runCommand, type CommandContext, type CommandWrite } from './context.ts';
import type { RetryTaskOptions } from './options.ts';
import { checkKeysFree } from './keyed-start.ts';

/** The data of a failed task's COMPENSATION_FAILED error (its cleanup failed for good), or null. */
export function failedCleanup(row: TaskRow): { cancelled: boolean } | null {
  if (row.status !== 'failed' || !row.error) return null;
  const error = decodeError(row.error);
  return error.code === ERROR_CODES.COMPENSATION_FAILED ? { cancelled: error.data?.cancelled === true } : null;
}

/** Why `task` may not be retried although it failed: it was cancelled (its cleanup then failed), or null. */
export function retryRefusal(task: TaskRow): string | null {
  if (!failedCleanup(task)?.cancelled) return null;
  return `Task ${task.id} was cancelled and its cleanup then failed: a cancelled task never resumes, so it cannot be retried. Undo by hand what its error names (it says what could not be undone), then start a new task if the work is still wanted.`;
}

export async function retryTask(ctx: CommandContext, id: string, options: RetryTaskOptions): Promise<TaskRow> {
  checkOptionKeys(options, RETRY_OPTIONS, 'engine.retry()');
  const compensate = compensateOption(options);
  const store = await ctx.open();
  // The first drifted model call is found by a replay, before the command's guarded write; a task
  // that has not ended is left to the command to refuse (its legal events), not replayed first.
  const current = options.fromStep === FIRST_DRIFT ? await store.getTask(id) : null;
  const fromStep = current && !isFinished(current.status) ? options.fromStep : await resolveFromStep(ctx, id, options.fromStep, 'engine.retry()');
  const newDeadline = options.deadline === undefined ? undefined : taskDeadline(ctx.clock.now(), options.deadline, undefined);
  return runCommand(ctx, id, 'retry', options.by, async (task) => {
    const refusal = retryRefusal(task);
    if (refusal) throw new ConflictError(refusal);
    if ((task.status === 'succeeded' || task.status === 'cancelled') && fromStep === undefined) {
      throw new ConflictError(
        `Task ${id} ${task.status === 'succeeded' ? 'succeeded' : 'was cancelled'}: only a failed task runs again from where it failed. Re-run it from a step with retry(id, { fromStep: '<step>' }) (stepwise retry ${id} --from-step <step>), or fork it (engine.fork).`,
      );
    }
    // A task that has not ended is refused by the lifecycle (its legal events) before any read.
    if (task.status !== 'failed' && task.status !== 'succeeded' && task.status !== 'cancelled') return {};
    await checkKeysFree(store, task);
    if (compensate) return planUndoingRerun(task, await store.getSteps(id), fromStep as string, retryDeadline(task, newDeadline, ctx.clock.now()));
    const plan = await planRetry(store, task, await store.getSteps(id), fromStep, retryDeadline(task, newDeadline, ctx.clock.now()));
    if (task.status === 'failed') return plan;
    // A re-run of a finished task: its outcome is forgotten with the steps that made it.
    return { ...plan, set: { ...plan.set, output: null, cancelReason: null, finishedAt: null }, detail: { ...(plan.detail as Record<string, unknown>), rerun: task.status } };
  });
}

/** `compensate`: a boolean, and only with `fromStep` (a failed task's retry from its failed step has nothing of its own to undo). */
function compensateOption(options: RetryTaskOptions): boolean {
  const { compensate } = options;
  if (compensate === undefined || compensate === false) return false;
  if (compensate !== true) throw new InvalidArgumentError(`engine.retry(): compensate must be true or false (got ${JSON.stringify(compensate) ?? typeof compensate}).`);
  if (options.fromStep === undefined)
    throw new InvalidArgumentError('engine.retry(): compensate undoes the steps a re-run forgets: name the step to re-run from with fromStep (--from-step on the command line).');
  return true;
}

/**
 * A re-run of a succeeded task that undoes first: the journal stays as it is and the task is marked
 * with the position of `fromStep`; the run that claims it runs the compensations of the steps from
 * there on, then forgets them (see `run/undo-rerun.ts`). A failed or cancelled task is refused:
 * its cleanup ran its compensations when it ended (a plain retry runs the undone steps again).
 */
function planUndoingRerun(task: TaskRow, steps: readonly StepRow[], fromStep: string, deadline: { deadlineAt?: number | null }): CommandWrite {
  if (task.status !== 'succeeded') {
    throw new ConflictError(
      `Task ${task.id} ${task.status === 'failed' ? 'failed' : 'was cancelled'}: its cleanup already ran the compensations of its completed steps when it ended (the steps it undid run again on retry, under new idempotency keys). compensate is for re-running a succeeded task: retry without it.`,
    );
  }
  const journal = steps.filter((s) => !isCleanupSeq(s.seq));
  const { deleteSteps, forgotten } = planRetryFrom(journal, fromStep, task.id);
  return {
    // hasCleanup: a cancel before a worker takes the task goes through `cancelling`, so that a worker
    // replays it and undoes every completed step (as a cancel during the undo does).
    set: { error: null, incrementRetries: true, ...deadline, output: null, cancelReason: null, finishedAt: null, undoFrom: deleteSteps[0] as number, hasCleanup: true },
    detail: { retry: task.retries + 1, fromStep, rerun: task.status, compensate: true, undoing: forgotten },
  };
}

/** A retry's plan: the failed task's journal split into the code's calls and its last cleanup, and what that cleanup undid. */
interface RetryJournal {
  task: TaskRow;
  journal: StepRow[];
  cleanup: StepRow[];
  undone: StepRow[];
  undoneRows: ReadonlyMap<number, StepRow>;
  /** The columns every retry sets besides the status. */
  set: TaskPatch;
  undoneDetail: Record<string, unknown>;
}

/** The steps forgotten: `rows`, the undone calls, and the whole last cleanup (`keep` excepted). */
function forget(r: RetryJournal, rows: readonly StepRow[], keep?: StepRow): { deleteSteps: number[]; forgotten: string[] } {
  const code = new Map(r.undoneRows);
  for (const s of rows) code.set(s.seq, s);
  if (keep) code.delete(keep.seq);
  const all = [...[...code.values()].sort((a, b) => a.seq - b.seq), ...r.cleanup];
  return { deleteSteps: all.map((s) => s.seq), forgotten: all.map((s) => s.name) };
}

async function planRetry(store: Store, task: TaskRow, steps: readonly StepRow[], fromStep: string | undefined, deadline: { deadlineAt?: number | null }): Promise<CommandWrite> {
  // The cleanup of the failure being retried is forgotten: it runs again if the task ends so again.
  const cleanup = steps.filter((s) => isCleanupSeq(s.seq)).sort((a, b) => a.seq - b.seq);
  const journal = steps.filter((s) => !isCleanupSeq(s.seq));
  // The steps that cleanup undid run again, and so does what the code did after receiving them.
  const undone = undoneSteps(journal, cleanup);
  // The retried task's deadline; undone steps run again under new idempotency keys (run/redo.ts).
  const set: TaskPatch = {
    error: null,
    undoFrom: null,
    incrementRetries: true,
    ...deadline,
    ...(undone.length
      ? {
          redo: countRedo(
            task.redo,
            undone.map((s) => s.name),
          ),
        }
      : {}),
  };
  const r: RetryJournal = {
    task,
    journal,
    cleanup,
    undone,
    undoneRows: forgetUndone(journal, undone),
    set,
    undoneDetail: undone.length ? { undone: undone.map((s) => s.name) } : {},
  };
  if (fromStep !== undefined) {
    const later = new Set(planRetryFrom(journal, fromStep, task.id).deleteSteps);
    const { deleteSteps, forgotten } = forget(
      r,
      journal.filter((s) => later.has(s.seq)),
    );
    return { set, deleteSteps, detail: { retry: task.retries + 1, fromStep, ...r.undoneDetail, forgotten } };
  }
  // A signal sent to the failed task replaces the one an event wait had received (a payload
  // the workflow could not handle): that wait and everything after it run again.
  const replaced = replacedWait(journal, await store.getSignals(task.id));
  if (replaced) {
    const { deleteSteps, forgotten } = forget(
      r,
      journal.filter((s) => s.seq === replaced.seq || (s.seq > replaced.seq && (s.done === null || (replaced.done !== null && s.done > replaced.done)))),
    );
    return { set, deleteSteps, detail: { retry: task.retries + 1, fromStep: replaced.name, replacedSignal: true, ...r.undoneDetail, forgotten } };
  }
  return retryFailedStep(r);
}

/** The retry of the step that failed the task (if the code did not make it after receiving an undone step). */
function retryFailedStep(r: RetryJournal): CommandWrite {
  const { task, journal, undone, set } = r;
  const failure = retryPoint(task, journal);
  // The failed step is reset, unless the code made it after receiving an undone step (then it
  // is forgotten with that step's consequences: the code may take another path to it).
  const reset = failure && !undone.some((u) => calledAfterReceiving(failure, u)) ? failure : undefined;
  // The earliest of the calls that run again, for the log.
  const first = [...(reset ? [reset] : []), ...undone].sort((a, b) => a.seq - b.seq)[0];
  if (!reset) {
    const { deleteSteps, forgotten } = forget(r, []);
    return {
      set,
      ...(deleteSteps.length ? { deleteSteps } : {}),
      detail: { retry: task.retries + 1, fromStep: first?.name ?? null, ...r.undoneDetail, ...(forgotten.length ? { forgotten } : {}) },
    };
  }
  // The failed step runs again with a fresh attempt budget (its error stays as `lastError`),
  // and what the code did after receiving that failure (a compensation, a log step, a wait)
  // is forgotten: on retry the code takes that path again only if the step fails again. A
  // call made before the code received the failure (a Promise.all branch beside the failed
  // step) is not a consequence of it: it is kept, so a completed side effect is not repeated.
  const { deleteSteps, forgotten } = forget(r, consequencesOf(journal, reset), reset);
  return {
    set,
    steps: [{ ...reset, status: 'retrying', attempts: 0, wakeAt: null, finishedAt: null, done: null }],
    deleteSteps,
    detail: { retry: task.retries + 1, fromStep: (first ?? reset).name, ...r.undoneDetail, forgotten },
  };
}

/**
 * The failed step a retry starts from: the one named by the task's error (a StepFailedError in
 * the error or its causes), else the last result the code received, if that was a failure.
 */
function retryPoint(task: TaskRow, journal: readonly StepRow[]): StepRow | undefined {
  const named = task.error ? failedStepOf(decodeError(task.error)) : undefined;
  const failed = journal.filter((s) => s.status === 'failed');
  const byName = failed.find((s) => s.name === named);
  if (byName) return byName;
  const last = journal.filter((s) => s.done !== null).sort((a, b) => (b.done as number) - (a.done as number))[0];
  return last?.status === 'failed' ? last : undefined;
}

/**
 * The earliest event wait whose received signal a newer, unconsumed signal of one of its names
 * replaces (sent after the wait received its own), or undefined.
 */
function replacedWait(journal: readonly StepRow[], signals: readonly SignalRow[]): StepRow | undefined {
  const waits = journal.filter((s) => s.kind === 'event' && s.status === 'completed' && s.done !== null && s.finishedAt !== null).sort((a, b) => (a.done as number) - (b.done as number));
  return waits.find((w) => {
    const names = (w.name.split('#')[0] as string).split('+');
    const received = signals.find((sig) => sig.consumedSeq === w.seq);
    return received && signals.some((sig) => sig.consumedSeq === null && sig.id > received.id && names.includes(sig.name));
  });
}

/** The step whose failure failed the task: a StepFailedError in the error or its causes. */
function failedStepOf(error: SerializedError): string | undefined {
  for (let e: SerializedError | undefined = error; e; e = e.cause) {
    if (e.code === 'STEP_FAILED' && typeof e.data?.stepName === 'string') return e.data.stepName;
  }
  return undefined;
}
