/**
 * @module errors/step
 * Errors of a step: those step code throws to steer retries (`RetryableError`, `NonRetryableError`,
 * `RepairableError`), and those the engine raises when a step fails, times out, returns an output its
 * schema refuses, would go over the task's model budget, or no longer matches the journal.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError, describeThrown, type StepwiseErrorOptions } from './base.ts';

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

/**
 * A durable call was made inside the function of another step (a helper that takes `ctx`, such
 * as a model call, called from a `ctx.step` function or a `ctx.forEach` item). A step's function
 * runs until it returns and only its result is recorded: on replay it is not called, so calls
 * inside it would not be made again and the journal would no longer line up. The task fails at
 * once with this error. `step`: the enclosing step; `call`: the durable call it made.
 */
export class NestedStepError extends StepwiseError {
  readonly taskId: string;
  readonly step: string;
  readonly call: string;
  constructor(taskId: string, step: string, call: string, message: string) {
    super(ERROR_CODES.NESTED_STEP, message);
    this.name = 'NestedStepError';
    this.taskId = taskId;
    this.step = step;
    this.call = call;
  }
}

/** Thrown into workflow code when a step failed for good (non-retryable, or attempts exhausted). */
export class StepFailedError extends StepwiseError {
  readonly stepName: string;
  readonly attempts: number;
  constructor(stepName: string, attempts: number, cause: unknown) {
    super(ERROR_CODES.STEP_FAILED, `Step "${stepName}" failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${describeThrown(cause)}`, { cause });
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
  /**
   * The task whose subtree budget the call would pass (`budget.scope: 'subtree'`: this task's or
   * one above it), counting the spending of every task below it; absent for a task's own budget.
   */
  readonly subtreeOf?: string;
  /** `note`: why a person's decision did not raise it, when the task asked (`onExceeded: { ask }`). */
  constructor(taskId: string, step: string, limit: 'tokens' | 'usd', budget: number, projected: number, note = '', subtreeOf?: string) {
    const amounts = limit === 'usd' ? `$${projected.toFixed(4)} of $${budget}` : `${projected} of ${budget} tokens`;
    super(
      ERROR_CODES.BUDGET_EXCEEDED,
      subtreeOf === undefined
        ? `Task ${taskId}: the model call of step "${step}" would exceed the task's ${limit} budget (${amounts})${note}. Raise it with engine.start(…, { budget }) for new tasks, or let a person raise it: budget.onExceeded: { ask }.`
        : `Task ${taskId}: the model call of step "${step}" would exceed the ${limit} budget of ${subtreeOf === taskId ? 'this task' : `task ${subtreeOf}`} and the tasks below it (${amounts}, all of them together)${note}. Raise it with engine.start(…, { budget: { …, scope: 'subtree' } }) for new trees.`,
    );
    this.name = 'BudgetExceededError';
    this.taskId = taskId;
    this.step = step;
    this.limit = limit;
    this.budget = budget;
    this.projected = projected;
    if (subtreeOf !== undefined) this.subtreeOf = subtreeOf;
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
    const list = issues
      .slice(0, 5)
      .map((i) => (i.path?.length ? `${i.path.join('.')}: ${i.message}` : i.message))
      .join('; ');
    super(ERROR_CODES.OUTPUT_INVALID, `The output of step "${stepName}" does not match its schema: ${list}${issues.length > 5 ? ` (and ${issues.length - 5} more)` : ''}`, {
      retryable: true,
    });
    this.name = 'OutputInvalidError';
    this.stepName = stepName;
    this.issues = issues;
    this.output = output;
  }
}
