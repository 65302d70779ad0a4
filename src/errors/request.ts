/**
 * @module errors/request
 * Errors of a request to the engine, whoever makes it (API, CLI, HTTP): a bad argument or input,
 * an unknown workflow or task, an event the lifecycle or a machine refuses, a key or a record that
 * conflicts, a payload over its limit, a wait that ran out of time.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError, type StepwiseErrorOptions } from './base.ts';

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
        (known.length ? `Known workflows: ${known.join(', ')}.` : 'No workflows are registered: pass them to new Engine({ workflows }) or start a worker that exports them.'),
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
    super(ERROR_CODES.IDEMPOTENCY_CONFLICT, `Idempotency key "${idempotencyKey}" already belongs to task ${existingTaskId}, ${why}. Use a new key for different work.`);
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

/** A value that must be stored (input, step output, workflow output) is not plain JSON data. */
export class NotSerializableError extends StepwiseError {
  readonly path: string;
  constructor(what: string, path: string, problem: string) {
    super(ERROR_CODES.NOT_SERIALIZABLE, `${what} cannot be checkpointed: ${path} ${problem}. Return plain JSON data (objects, arrays, strings, finite numbers, booleans, null).`);
    this.name = 'NotSerializableError';
    this.path = path;
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
