/**
 * @module errors
 * Every public error Stepwise throws, in one place. Each class carries a stable string `code`
 * (compare codes, not classes: errors that crossed a process boundary or came back from the store
 * are rebuilt from JSON, where `instanceof` may not hold) and `readonly` context fields.
 *
 * Step code may throw {@link RetryableError} or {@link NonRetryableError} to steer retries; any
 * other error is retryable unless it says otherwise (`retryable: false`).
 *
 * The classes live in `errors/` by family; this module is the one every other module imports.
 * The codes are one table, `errors/codes.ts`.
 */

// Codes and their HTTP statuses
export { ERROR_CODES, HTTP_STATUS } from './errors/codes.ts';
export type { ErrorCode } from './errors/codes.ts';

// The base class and the checks that work on rebuilt errors
export { StepwiseError, httpStatusOf, isStepwiseError, isRetryable, coerceError } from './errors/base.ts';
export type { StepwiseErrorOptions } from './errors/base.ts';

// Requests: arguments, inputs, unknown names, refused events, conflicts, limits, waits
export {
  InvalidArgumentError,
  InvalidInputError,
  WorkflowNotFoundError,
  TaskNotFoundError,
  IllegalTransitionError,
  EventRefusedError,
  IdempotencyConflictError,
  ConcurrentUpdateError,
  NotSerializableError,
  ForbiddenError,
  ConflictError,
  IdempotencyInProgressError,
  PayloadTooLargeError,
  TimeoutError,
} from './errors/request.ts';

// Steps: thrown by step code, or raised when a step fails
export {
  NonDeterminismError,
  NestedStepError,
  StepFailedError,
  StepTimeoutError,
  RetryableError,
  NonRetryableError,
  BudgetExceededError,
  RepairableError,
  OutputInvalidError,
} from './errors/step.ts';
export type { OutputIssue } from './errors/step.ts';

// Starts refused for the tasks holding their key
export { SingletonRunningError } from './errors/start.ts';
// Child tasks
export { ChildFailedError, ChildDepthExceededError } from './errors/child.ts';

// How a task ended
export { DeadlineExceededError, CompensationFailedError, RerunUndoError, TaskFailedError, TaskCancelledError, DwellTimeoutError } from './errors/task.ts';

// Workers and stores
export { LeaseLostError, WorkerStoppingError, SchemaMismatchError, StoreUnavailableError, StoreRefusedError, StoreDamagedError, ClosedError } from './errors/runtime.ts';

// Approvals
export { ApprovalNotFoundError, TaskEndedError, ApprovalRequiredError, ApprovalExpiredError } from './errors/approval.ts';
export { ScheduleNotFoundError } from './errors/schedule.ts';

// Replays of a task's journal against the current code
export { ReplayCheckError, isReplayCheckError } from './errors/replay.ts';
export type { ReplayFailure } from './errors/replay.ts';

// The payload store
export { PayloadUnreadableError } from './errors/payload.ts';
