/**
 * @module errors/task
 * How a task ended, as `engine.result()` and the task's error say it: failed, cancelled, past its
 * deadline, too long waiting or paused, or with a cleanup that failed for good.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError, describeThrown } from './base.ts';

/** The task ran past its deadline: the running step's signal fired and the task failed. Not retried. */
export class DeadlineExceededError extends StepwiseError {
  readonly taskId: string;
  readonly deadline: number;
  constructor(taskId: string, deadline: number) {
    super(ERROR_CODES.DEADLINE_EXCEEDED, `Task ${taskId} ran past its deadline (${new Date(deadline).toISOString()}).`);
    this.name = 'DeadlineExceededError';
    this.taskId = taskId;
    this.deadline = deadline;
  }
}

/**
 * The first run of a re-run that undoes first (`retry(id, { fromStep, compensate: true })`) stops
 * the code with this error: the code replays what it recorded and every new call is refused with
 * it, while the compensations of the steps from `fromStep` on run. It reaches people only as the
 * `cause` of a {@link CompensationFailedError} when one of those compensations failed for good.
 */
export class RerunUndoError extends StepwiseError {
  /** The task being re-run. */
  readonly taskId: string;
  /** The step it is re-run from: its compensations and those of the later steps run. */
  readonly fromStep: string;
  constructor(taskId: string, fromStep: string) {
    super(ERROR_CODES.RERUN_UNDOING, `Task ${taskId} is re-run from step "${fromStep}", undoing the steps from there on first`);
    this.name = 'RerunUndoError';
    this.taskId = taskId;
    this.fromStep = fromStep;
  }
}

/**
 * The step a {@link CompensationFailedError} names for the cancel of a failed parent's child tasks
 * (those started with `onParentEnd: 'cancel'`), when it failed or did not finish in time.
 */
export const CHILD_TASKS = 'child tasks';

/**
 * The cleanup after a failure for good or a cancel failed for good: a compensation or an `onCancel`
 * handler failed (or the cleanup ran past its deadline), so what the task did is not fully undone
 * and the task ends `failed` — a cancelled one too. `cause` is what ended the task: its original
 * error, or the {@link TaskCancelledError} of the cancel; `failures` name each step whose
 * compensation failed (or `onCancel`), with its error.
 */
export class CompensationFailedError extends StepwiseError {
  readonly taskId: string;
  /**
   * The steps whose compensation failed or did not run (`onCancel` for a cancel handler,
   * `child tasks` for the cancel of the children a failed parent ends), and steps still running
   * when the cleanup began (not undone), comma-separated.
   */
  readonly failedCompensations: string;
  /** The task had been cancelled (a cancelled task is never retried: the cleanup is left to people). */
  readonly cancelled: boolean;
  /** The cancel's reason, when `cancelled`. */
  readonly cancelReason: string | null;
  constructor(taskId: string, original: Error | null, failures: ReadonlyArray<{ step: string; error: Error }>, cancel?: { reason: string | undefined }) {
    const list = failures
      .map((f) => `${f.step === 'onCancel' ? 'onCancel cleanup' : f.step === CHILD_TASKS ? 'the cancel of its child tasks' : `compensation of "${f.step}"`}: ${f.error.message}`)
      .join('; ');
    const ending = cancel ? ` was cancelled${cancel.reason ? ` (reason: ${cancel.reason})` : ''} and` : original ? ` failed (${original.message}) and` : '';
    super(ERROR_CODES.COMPENSATION_FAILED, `Task ${taskId}${ending} could not be fully undone: ${list}. Manual cleanup is needed.`, original ? { cause: original } : {});
    this.name = 'CompensationFailedError';
    this.taskId = taskId;
    this.failedCompensations = failures.map((f) => f.step).join(', ');
    this.cancelled = cancel !== undefined;
    this.cancelReason = cancel?.reason ?? null;
  }
}

/** `engine.result()` of a task that ended `failed`. `cause` is the task's error. */
export class TaskFailedError extends StepwiseError {
  readonly taskId: string;
  constructor(taskId: string, cause: unknown) {
    super(ERROR_CODES.TASK_FAILED, `Task ${taskId} failed: ${describeThrown(cause)}`, { cause });
    this.name = 'TaskFailedError';
    this.taskId = taskId;
  }
}

/** `engine.result()` of a cancelled task; also what step code sees as its signal's reason on cancel. */
export class TaskCancelledError extends StepwiseError {
  readonly taskId: string;
  readonly reason: string | undefined;
  constructor(taskId: string, reason?: string) {
    super(ERROR_CODES.TASK_CANCELLED, `Task ${taskId} was cancelled${reason ? `: ${reason}` : ''}`);
    this.name = 'TaskCancelledError';
    this.taskId = taskId;
    this.reason = reason;
  }
}

/** A task stayed waiting or paused longer than its workflow's `dwell` bound allows: it failed. */
export class DwellTimeoutError extends StepwiseError {
  readonly status: string;
  readonly afterMs: number;
  constructor(taskId: string, status: string, afterMs: number) {
    super(ERROR_CODES.TIMEOUT, `Task ${taskId} stayed ${status} for more than ${afterMs}ms, the bound of its workflow's dwell.${status} option; retry it to run it again.`);
    this.name = 'DwellTimeoutError';
    this.status = status;
    this.afterMs = afterMs;
  }
}
