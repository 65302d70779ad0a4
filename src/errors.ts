/**
 * @module errors
 * Every public error Stepwise throws, in one place. Each class carries a stable string `code`
 * (compare codes, not classes: errors that crossed a process boundary or came back from the store
 * are rebuilt from JSON, where `instanceof` may not hold) and `readonly` context fields.
 *
 * Step code may throw {@link RetryableError} or {@link NonRetryableError} to steer retries; any
 * other error is retryable unless it says otherwise (`retryable: false`).
 */

export const ERROR_CODES = Object.freeze({
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  INVALID_INPUT: 'INVALID_INPUT',
  WORKFLOW_NOT_FOUND: 'WORKFLOW_NOT_FOUND',
  TASK_NOT_FOUND: 'TASK_NOT_FOUND',
  ILLEGAL_TRANSITION: 'ILLEGAL_TRANSITION',
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  CONCURRENT_UPDATE: 'CONCURRENT_UPDATE',
  NON_DETERMINISM: 'NON_DETERMINISM',
  NOT_SERIALIZABLE: 'NOT_SERIALIZABLE',
  STEP_FAILED: 'STEP_FAILED',
  STEP_TIMEOUT: 'STEP_TIMEOUT',
  RETRYABLE: 'RETRYABLE',
  NON_RETRYABLE: 'NON_RETRYABLE',
  TASK_FAILED: 'TASK_FAILED',
  TASK_CANCELLED: 'TASK_CANCELLED',
  LEASE_LOST: 'LEASE_LOST',
  WORKER_STOPPING: 'WORKER_STOPPING',
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  SCHEMA_MISMATCH: 'SCHEMA_MISMATCH',
  CLOSED: 'CLOSED',
  TIMEOUT: 'TIMEOUT',
  /** The actor may not do this (not a listed approver, a role without the right, a closed decision). */
  FORBIDDEN: 'FORBIDDEN',
  /** The request contradicts what is already recorded (a contrary decision, a reused key with other data). */
  CONFLICT: 'CONFLICT',
  /** No such record (an approval id nobody issued). */
  NOT_FOUND: 'NOT_FOUND',
  /** The task has ended (cancelled, succeeded, failed or being cancelled): it takes no more decisions. */
  TASK_ENDED: 'TASK_ENDED',
  /** An input, output or payload is larger than the engine's configured limit. */
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  /** The database refused a write for a reason retrying cannot fix (a value it cannot hold, a constraint). */
  STORE_REFUSED: 'STORE_REFUSED',
  /** A model call would take the task over its token or cost budget. */
  BUDGET_EXCEEDED: 'BUDGET_EXCEEDED',
  /** Another caller is running the operation of this idempotency key right now (`whileRunning: 'error'`). */
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
  /** A step's output failed its schema (`output` option); a repair attempt may fix it. */
  OUTPUT_INVALID: 'OUTPUT_INVALID',
  /** Step code asked for a repair attempt (a business error another attempt may fix given the error). */
  REPAIRABLE: 'REPAIRABLE',
  /** The task ran past its deadline (`workflow(…, { timeout })`, `engine.start(…, { deadline })`). */
  DEADLINE_EXCEEDED: 'DEADLINE_EXCEEDED',
  /** A compensation (or cancel cleanup) failed for good: the task's effects need manual cleanup. */
  COMPENSATION_FAILED: 'COMPENSATION_FAILED',
  /** A state machine does not take this event now (not one of its state's events, a guard said no, or it is busy). */
  EVENT_REFUSED: 'EVENT_REFUSED',
  /** `checkResume` (stepwise-engine/testing): a workflow ended otherwise after a crash, ran a durable step again, … */
  RESUME_CHECK_FAILED: 'RESUME_CHECK_FAILED',
  /** `checkReplay` (stepwise-engine/testing): the current code does not replay a recorded task as it ran. */
  REPLAY_CHECK_FAILED: 'REPLAY_CHECK_FAILED',
} as const);
export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/**
 * What each code means to an HTTP client: the status a server answers with. Codes a task's own
 * failure carries (a step that failed, a cancelled task) are 409 when they come back from a command
 * on that task, and 500 only for the engine's own faults. One table, used by the server and by
 * anyone mapping errors to statuses, so that a code never answers two different ways.
 */
export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  INVALID_ARGUMENT: 400,
  INVALID_INPUT: 400,
  NOT_SERIALIZABLE: 400,
  PAYLOAD_TOO_LARGE: 413,
  STORE_REFUSED: 422,
  FORBIDDEN: 403,
  WORKFLOW_NOT_FOUND: 404,
  TASK_NOT_FOUND: 404,
  NOT_FOUND: 404,
  TASK_ENDED: 409,
  ILLEGAL_TRANSITION: 409,
  IDEMPOTENCY_CONFLICT: 409,
  CONFLICT: 409,
  CONCURRENT_UPDATE: 409,
  TASK_FAILED: 409,
  TASK_CANCELLED: 409,
  STEP_FAILED: 409,
  NON_DETERMINISM: 409,
  NON_RETRYABLE: 422,
  RETRYABLE: 503,
  STEP_TIMEOUT: 504,
  TIMEOUT: 504,
  LEASE_LOST: 409,
  WORKER_STOPPING: 503,
  STORE_UNAVAILABLE: 503,
  CLOSED: 503,
  SCHEMA_MISMATCH: 500,
  BUDGET_EXCEEDED: 402,
  IDEMPOTENCY_IN_PROGRESS: 409,
  OUTPUT_INVALID: 422,
  REPAIRABLE: 422,
  DEADLINE_EXCEEDED: 504,
  COMPENSATION_FAILED: 409,
  EVENT_REFUSED: 409,
  RESUME_CHECK_FAILED: 500,
  REPLAY_CHECK_FAILED: 500,
});

/** The HTTP status for an error: its code's entry in {@link HTTP_STATUS}, 500 for anything else. */
export function httpStatusOf(e: unknown): number {
  return isStepwiseError(e) ? HTTP_STATUS[e.code] : 500;
}

export interface StepwiseErrorOptions {
  cause?: unknown;
}

/** Base class of every error Stepwise throws. `code` is stable; `message` is for people. */
export class StepwiseError extends Error {
  readonly code: ErrorCode;
  /** Whether a step that failed with this error may be attempted again. */
  readonly retryable: boolean;
  constructor(code: ErrorCode, message: string, options: StepwiseErrorOptions & { retryable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StepwiseError';
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** A bad argument to an API call or CLI command (bad duration, bad store URL, bad option). */
export class InvalidArgumentError extends StepwiseError {
  constructor(message: string, options?: StepwiseErrorOptions) {
    super(ERROR_CODES.INVALID_ARGUMENT, message, options);
    this.name = 'InvalidArgumentError';
  }
}

/** The input given to `start` is not JSON-serialisable or fails the workflow's input schema. */
export class InvalidInputError extends StepwiseError {
  readonly workflow: string;
  constructor(workflow: string, message: string, options?: StepwiseErrorOptions) {
    super(ERROR_CODES.INVALID_INPUT, `Invalid input for workflow "${workflow}": ${message}`, options);
    this.name = 'InvalidInputError';
    this.workflow = workflow;
  }
}

export class WorkflowNotFoundError extends StepwiseError {
  readonly workflow: string;
  constructor(workflow: string, known: readonly string[]) {
    super(
      ERROR_CODES.WORKFLOW_NOT_FOUND,
      `Unknown workflow "${workflow}". ` +
        (known.length
          ? `Known workflows: ${known.join(', ')}.`
          : 'No workflows are registered: pass them to new Engine({ workflows }) or start a worker that exports them.'),
    );
    this.name = 'WorkflowNotFoundError';
    this.workflow = workflow;
  }
}

export class TaskNotFoundError extends StepwiseError {
  readonly taskId: string;
  constructor(taskId: string) {
    super(ERROR_CODES.TASK_NOT_FOUND, `No task with id "${taskId}". List tasks with \`stepwise ls\`.`);
    this.name = 'TaskNotFoundError';
    this.taskId = taskId;
  }
}

/** An event the lifecycle table does not allow from the task's current status. */
export class IllegalTransitionError extends StepwiseError {
  readonly taskId: string | undefined;
  readonly status: string;
  readonly event: string;
  readonly legalEvents: readonly string[];
  constructor(status: string, event: string, legalEvents: readonly string[], taskId?: string) {
    super(
      ERROR_CODES.ILLEGAL_TRANSITION,
      `Cannot ${event} ${taskId ? `task ${taskId}` : 'a task'}: it is ${status}, and "${event}" is not legal from ${status}. ` +
        (legalEvents.length ? `Legal events: ${legalEvents.join(', ')}.` : `A ${status} task accepts no events.`),
    );
    this.name = 'IllegalTransitionError';
    this.taskId = taskId;
    this.status = status;
    this.event = event;
    this.legalEvents = legalEvents;
  }
}

/**
 * A state machine's task (`machine()`) does not take an event sent to it (`engine.send`), and nothing
 * was sent: the event is not one of its current state's, a guard refused it, the machine is busy
 * (its state's entry action runs, or it is between states), or the task has ended. `legalEvents`
 * are the events it takes now.
 */
export class EventRefusedError extends StepwiseError {
  readonly taskId: string;
  readonly event: string;
  /** The machine's state, when known (`null`: an engine without the machine's definition, before it first waited). */
  readonly state: string | null;
  readonly legalEvents: readonly string[];
  readonly reason: 'not-in-state' | 'guard' | 'busy' | 'ended';
  constructor(taskId: string, event: string, state: string | null, legalEvents: readonly string[], reason: EventRefusedError['reason'], detail: string) {
    const takes = legalEvents.length ? `It takes ${legalEvents.map((e) => `"${e}"`).join(', ')} now.` : 'It takes no event now.';
    super(ERROR_CODES.EVENT_REFUSED, `Cannot send "${event}" to task ${taskId}${state ? ` in state "${state}"` : ''}: ${detail} ${takes} Nothing was sent.`);
    this.name = 'EventRefusedError';
    this.taskId = taskId;
    this.event = event;
    this.state = state;
    this.legalEvents = legalEvents;
    this.reason = reason;
  }
}

/** The idempotency key is already used by a task with a different workflow or input. */
export class IdempotencyConflictError extends StepwiseError {
  readonly idempotencyKey: string;
  readonly existingTaskId: string;
  constructor(idempotencyKey: string, existingTaskId: string, why: string) {
    super(
      ERROR_CODES.IDEMPOTENCY_CONFLICT,
      `Idempotency key "${idempotencyKey}" already belongs to task ${existingTaskId}, ${why}. Use a new key for different work.`,
    );
    this.name = 'IdempotencyConflictError';
    this.idempotencyKey = idempotencyKey;
    this.existingTaskId = existingTaskId;
  }
}

/** A command kept losing a compare-and-set race against other writers. */
export class ConcurrentUpdateError extends StepwiseError {
  readonly taskId: string;
  constructor(taskId: string) {
    super(ERROR_CODES.CONCURRENT_UPDATE, `Task ${taskId} kept changing under this command; try again.`, {
      retryable: true,
    });
    this.name = 'ConcurrentUpdateError';
    this.taskId = taskId;
  }
}

/** The workflow code no longer matches the task's journal: replaying it would be wrong. */
export class NonDeterminismError extends StepwiseError {
  readonly taskId: string;
  readonly position: number;
  constructor(taskId: string, position: number, message: string) {
    super(ERROR_CODES.NON_DETERMINISM, message);
    this.name = 'NonDeterminismError';
    this.taskId = taskId;
    this.position = position;
  }
}

/** A value that must be stored (input, step output, workflow output) is not plain JSON data. */
export class NotSerializableError extends StepwiseError {
  readonly path: string;
  constructor(what: string, path: string, problem: string) {
    super(
      ERROR_CODES.NOT_SERIALIZABLE,
      `${what} cannot be checkpointed: ${path} ${problem}. Return plain JSON data (objects, arrays, strings, finite numbers, booleans, null).`,
    );
    this.name = 'NotSerializableError';
    this.path = path;
  }
}

/** Thrown into workflow code when a step failed for good (non-retryable, or attempts exhausted). */
export class StepFailedError extends StepwiseError {
  readonly stepName: string;
  readonly attempts: number;
  constructor(stepName: string, attempts: number, cause: unknown) {
    super(
      ERROR_CODES.STEP_FAILED,
      `Step "${stepName}" failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${describe(cause)}`,
      { cause },
    );
    this.name = 'StepFailedError';
    this.stepName = stepName;
    this.attempts = attempts;
  }
}

/** One attempt of a step ran longer than its `timeout`. Retryable. */
export class StepTimeoutError extends StepwiseError {
  readonly stepName: string;
  readonly timeoutMs: number;
  constructor(stepName: string, timeoutMs: number) {
    super(ERROR_CODES.STEP_TIMEOUT, `Step "${stepName}" timed out after ${timeoutMs}ms`, { retryable: true });
    this.name = 'StepTimeoutError';
    this.stepName = stepName;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Throw from step code for a failure worth retrying. `retryAfterMs` (for example from an HTTP
 * `Retry-After` header) replaces the computed backoff for the next attempt.
 */
export class RetryableError extends StepwiseError {
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: StepwiseErrorOptions & { retryAfterMs?: number } = {}) {
    super(ERROR_CODES.RETRYABLE, message, { cause: options.cause, retryable: true });
    this.name = 'RetryableError';
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Throw from step code for a failure that another attempt cannot fix: the step fails at once. */
export class NonRetryableError extends StepwiseError {
  constructor(message: string, options?: StepwiseErrorOptions) {
    super(ERROR_CODES.NON_RETRYABLE, message, { ...options, retryable: false });
    this.name = 'NonRetryableError';
  }
}

/**
 * A model call (`stepwise-engine/ai`) would take the task over its budget (`workflow(…, { budget })`
 * or `engine.start(…, { budget })`): the call is not made and the task fails with this error. The
 * spending it counts is durable, so a resumed task does not get its budget back.
 */
export class BudgetExceededError extends StepwiseError {
  readonly taskId: string;
  readonly step: string;
  /** Which limit: tokens or US dollars. */
  readonly limit: 'tokens' | 'usd';
  readonly budget: number;
  /** Spent before the call (plus what the call may take, when it declares `maxOutputTokens`). */
  readonly projected: number;
  /** `note`: why a person's decision did not raise it, when the task asked (`onExceeded: { ask }`). */
  constructor(taskId: string, step: string, limit: 'tokens' | 'usd', budget: number, projected: number, note = '') {
    super(
      ERROR_CODES.BUDGET_EXCEEDED,
      `Task ${taskId}: the model call of step "${step}" would exceed the task's ${limit} budget (${limit === 'usd' ? `$${projected.toFixed(4)} of $${budget}` : `${projected} of ${budget} tokens`})${note}. Raise it with engine.start(…, { budget }) for new tasks, or let a person raise it: budget.onExceeded: { ask }.`,
    );
    this.name = 'BudgetExceededError';
    this.taskId = taskId;
    this.step = step;
    this.limit = limit;
    this.budget = budget;
    this.projected = projected;
  }
}

/**
 * Throw from step code for a business error another attempt may fix when told what was wrong (a
 * model's answer that breaks a rule): it uses the step's `repair` budget, not its retries, and
 * the next attempt receives it as `lastError` and `output` as `lastOutput`.
 */
export class RepairableError extends StepwiseError {
  readonly failureKind = 'repair' as const;
  /** The output that was wrong (JSON data), handed to the next attempt as `lastOutput`. */
  readonly output: unknown;
  constructor(message: string, options: StepwiseErrorOptions & { output?: unknown } = {}) {
    super(ERROR_CODES.REPAIRABLE, message, { cause: options.cause, retryable: true });
    this.name = 'RepairableError';
    this.output = options.output;
  }
}

/** One problem a schema found in a value (Standard Schema's issue: a message and a path). */
export interface OutputIssue {
  message: string;
  path?: Array<string | number>;
}

/** A step's output failed its `output` schema; `issues` say why, `output` is what was returned. */
export class OutputInvalidError extends StepwiseError {
  readonly failureKind = 'repair' as const;
  readonly stepName: string;
  readonly issues: OutputIssue[];
  readonly output: unknown;
  constructor(stepName: string, issues: OutputIssue[], output: unknown) {
    const list = issues.slice(0, 5).map((i) => (i.path?.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ');
    super(ERROR_CODES.OUTPUT_INVALID, `The output of step "${stepName}" does not match its schema: ${list}${issues.length > 5 ? ` (and ${issues.length - 5} more)` : ''}`, { retryable: true });
    this.name = 'OutputInvalidError';
    this.stepName = stepName;
    this.issues = issues;
    this.output = output;
  }
}

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
 * The cleanup after a failure for good or a cancel failed for good: a compensation or an `onCancel`
 * handler failed (or the cleanup ran past its deadline), so what the task did is not fully undone
 * and the task ends `failed` — a cancelled one too. `cause` is what ended the task: its original
 * error, or the {@link TaskCancelledError} of the cancel; `failures` name each step whose
 * compensation failed (or `onCancel`), with its error.
 */
export class CompensationFailedError extends StepwiseError {
  readonly taskId: string;
  /**
   * The steps whose compensation failed or did not run (`onCancel` for a cancel handler), and steps
   * still running when the cleanup began (not undone), comma-separated.
   */
  readonly failedCompensations: string;
  /** The task had been cancelled (a cancelled task is never retried: the cleanup is left to people). */
  readonly cancelled: boolean;
  /** The cancel's reason, when `cancelled`. */
  readonly cancelReason: string | null;
  constructor(taskId: string, original: Error | null, failures: ReadonlyArray<{ step: string; error: Error }>, cancel?: { reason: string | undefined }) {
    const list = failures.map((f) => `${f.step === 'onCancel' ? 'onCancel cleanup' : `compensation of "${f.step}"`}: ${f.error.message}`).join('; ');
    const ending = cancel
      ? ` was cancelled${cancel.reason ? ` (reason: ${cancel.reason})` : ''} and`
      : original ? ` failed (${original.message}) and` : '';
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
    super(ERROR_CODES.TASK_FAILED, `Task ${taskId} failed: ${describe(cause)}`, { cause });
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

/** The worker lost its lease on a task (another worker took it over); its writes are refused. */
export class LeaseLostError extends StepwiseError {
  readonly taskId: string;
  readonly epoch: number;
  constructor(taskId: string, epoch: number) {
    super(
      ERROR_CODES.LEASE_LOST,
      `Lost the lease on task ${taskId} (epoch ${epoch}): another worker owns it now; this run's writes are refused.`,
    );
    this.name = 'LeaseLostError';
    this.taskId = taskId;
    this.epoch = epoch;
  }
}

/** The signal reason a step sees when its worker is shutting down (the task resumes elsewhere). */
export class WorkerStoppingError extends StepwiseError {
  constructor() {
    super(ERROR_CODES.WORKER_STOPPING, 'The worker is stopping; the task will resume on another worker.', {
      retryable: true,
    });
    this.name = 'WorkerStoppingError';
  }
}

/** The database schema is newer than this version of Stepwise understands, or otherwise unusable. */
export class SchemaMismatchError extends StepwiseError {
  constructor(message: string) {
    super(ERROR_CODES.SCHEMA_MISMATCH, message);
    this.name = 'SchemaMismatchError';
  }
}

export class StoreUnavailableError extends StepwiseError {
  constructor(message: string, options?: StepwiseErrorOptions) {
    super(ERROR_CODES.STORE_UNAVAILABLE, message, { ...options, retryable: true });
    this.name = 'StoreUnavailableError';
  }
}

/**
 * The database refused a statement for a reason that retrying cannot fix: a value it cannot hold
 * (PostgreSQL SQLSTATE class 22), a constraint (class 23, SQLite SQLITE_CONSTRAINT), or a
 * statement it rejects. Not retryable: a step whose checkpoint is refused fails with it.
 * `dbCode`: the database's own code (a SQLSTATE, or SQLite's extended code name).
 */
export class StoreRefusedError extends StepwiseError {
  readonly dbCode: string | null;
  constructor(message: string, options: StepwiseErrorOptions & { dbCode?: string | null } = {}) {
    super(ERROR_CODES.STORE_REFUSED, message, { ...options, retryable: false });
    this.name = 'StoreRefusedError';
    this.dbCode = options.dbCode ?? null;
  }
}

export class ClosedError extends StepwiseError {
  constructor(what: string) {
    super(ERROR_CODES.CLOSED, `${what} is closed.`);
    this.name = 'ClosedError';
  }
}

/** The actor may not do what it asked: `reason` says why and what would be allowed. */
export class ForbiddenError extends StepwiseError {
  readonly actor: string | undefined;
  constructor(message: string, options: StepwiseErrorOptions & { actor?: string } = {}) {
    super(ERROR_CODES.FORBIDDEN, message, options);
    this.name = 'ForbiddenError';
    this.actor = options.actor;
  }
}

/** The request contradicts what is already recorded; `recorded` is what was recorded first. */
export class ConflictError extends StepwiseError {
  readonly recorded: unknown;
  constructor(message: string, options: StepwiseErrorOptions & { recorded?: unknown } = {}) {
    super(ERROR_CODES.CONFLICT, message, options);
    this.name = 'ConflictError';
    this.recorded = options.recorded;
  }
}

/**
 * `engine.idempotency.run(key, …, { whileRunning: 'error' })` found the key's operation in progress
 * under another owner's live lease. Retryable: try again after `retryAfterMs` (when that lease
 * runs out, if its owner has died), or pass `whileRunning: 'wait'`.
 */
export class IdempotencyInProgressError extends StepwiseError {
  readonly idempotencyKey: string;
  /** Until the current owner's lease runs out (ms from now); it renews while it is alive. */
  readonly retryAfterMs: number;
  constructor(idempotencyKey: string, retryAfterMs: number) {
    super(
      ERROR_CODES.IDEMPOTENCY_IN_PROGRESS,
      `The operation of idempotency key "${idempotencyKey}" is in progress elsewhere. Retry later (its owner's lease ends in ${Math.max(0, Math.round(retryAfterMs))} ms unless renewed), or pass whileRunning: 'wait' to wait for its result.`,
      { retryable: true },
    );
    this.name = 'IdempotencyInProgressError';
    this.idempotencyKey = idempotencyKey;
    this.retryAfterMs = retryAfterMs;
  }
}

/** An approval id that names no approval. */
export class ApprovalNotFoundError extends StepwiseError {
  readonly approvalId: string;
  constructor(approvalId: string) {
    super(ERROR_CODES.NOT_FOUND, `No approval with id "${approvalId}". List open approvals with \`stepwise approvals --pending\`.`);
    this.name = 'ApprovalNotFoundError';
    this.approvalId = approvalId;
  }
}

/** A decision for a task that has ended (or is being cancelled): nothing was recorded. */
export class TaskEndedError extends StepwiseError {
  readonly taskId: string;
  readonly status: string;
  constructor(taskId: string, status: string, what: string) {
    super(ERROR_CODES.TASK_ENDED, `Task ${taskId} is ${status}: ${what} was not recorded. A ${status} task takes no decisions; start a new task if the work is still wanted.`);
    this.name = 'TaskEndedError';
    this.taskId = taskId;
    this.status = status;
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

/** A step guarded by `requires` ran without its approval approved: it fails for good. */
export class ApprovalRequiredError extends StepwiseError {
  readonly stepName: string;
  readonly approval: string;
  constructor(stepName: string, approval: string, why: string) {
    super(ERROR_CODES.FORBIDDEN, `Step "${stepName}" requires approval "${approval}", which ${why}: the engine refused to run it.`, { retryable: false });
    this.name = 'ApprovalRequiredError';
    this.stepName = stepName;
    this.approval = approval;
  }
}

/** A value is larger than its limit (`EngineOptions.limits`); nothing was stored. */
export class PayloadTooLargeError extends StepwiseError {
  readonly bytes: number;
  readonly limitBytes: number;
  constructor(what: string, bytes: number, limitBytes: number, option: string) {
    super(
      ERROR_CODES.PAYLOAD_TOO_LARGE,
      `${what} is ${bytes} bytes as JSON, over the limit of ${limitBytes} bytes. Keep large data outside the task (a file or object store) and pass a reference, or raise limits.${option}.`,
    );
    this.name = 'PayloadTooLargeError';
    this.bytes = bytes;
    this.limitBytes = limitBytes;
  }
}

/** A wait (for example `engine.result(id, { timeout })`) ran out of time. */
export class TimeoutError extends StepwiseError {
  constructor(message: string) {
    super(ERROR_CODES.TIMEOUT, message);
    this.name = 'TimeoutError';
  }
}

/** True when `e` is a Stepwise error, optionally with the given code; works on rebuilt errors too. */
export function isStepwiseError(e: unknown, code?: ErrorCode): e is StepwiseError {
  if (typeof e !== 'object' || e === null) return false;
  const c = (e as { code?: unknown }).code;
  if (typeof c !== 'string' || !(Object.values(ERROR_CODES) as string[]).includes(c)) return false;
  return code === undefined || c === code;
}

/** Whether a step that threw `e` may be attempted again (unless its retry policy says otherwise). */
export function isRetryable(e: unknown): boolean {
  if (typeof e === 'object' && e !== null) {
    const r = (e as { retryable?: unknown }).retryable;
    if (typeof r === 'boolean') return r;
  }
  return true;
}

/** Turns anything thrown into an Error, keeping the original as `cause` when it was not one. */
export function coerceError(e: unknown): Error {
  if (e instanceof Error) return e;
  if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') {
    const err = new Error((e as { message: string }).message, { cause: e });
    const name = (e as { name?: unknown }).name;
    if (typeof name === 'string') err.name = name;
    return err;
  }
  return new Error(typeof e === 'string' ? e : `Non-error thrown: ${safeString(e)}`, { cause: e });
}

function describe(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') {
    return (e as { message: string }).message;
  }
  return safeString(e);
}

function safeString(v: unknown): string {
  try {
    return typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  } catch {
    return String(v);
  }
}
