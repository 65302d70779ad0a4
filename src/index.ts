/**
 * @module stepwise
 * Durable execution for long-running AI-agent tasks: checkpointed steps, a lifecycle state
 * machine, leases with fencing, retries, cancellation, and crash resume, embedded on SQLite or
 * shared by many workers on PostgreSQL.
 */

// Defining workflows
export { workflow, isWorkflow } from './workflow.ts';
export type {
  Workflow, WorkflowContext, WorkflowFunction, WorkflowOptions, StepContext, StepOptions, InputSchema,
  EventResult, WaitForEventOptions, JsonSafe,
} from './workflow.ts';

// Running them
export { Engine, TaskHandle } from './engine.ts';
export type { EngineOptions, CommandOptions, SignalOptions, SignalResult, By, StartOptions, StartResult, ListOptions, ListResult, ResultOptions, Explanation } from './engine.ts';
export { Worker } from './worker.ts';
export type { WorkerOptions, WorkerState } from './worker.ts';
export type { WorkerEvents, WorkerEventName } from './events.ts';

// Approvals
export type {
  ApprovalOptions, ApprovalDecision, ApprovalDecisionRecord, ApprovalInfo, ApprovalStatus, ApprovalsQuery, ApprovalNotice, DecideOptions, TimeoutPolicy,
} from './approvals/types.ts';
export type { ApprovalEvent } from './approvals/events.ts';
export type { DwellOptions, DwellBound, DwellEvent } from './dwell/types.ts';

// Reading tasks
export type { TaskInfo, TaskSummary, StepInfo, TaskLease } from './task-info.ts';
export type {
  TaskEvent, TaskEventType, Actor, StepRecord, TransitionEvent, StepEvent, StepsForgottenEvent, SignalReceivedEvent,
  SignalConsumedEvent, UnknownEvent, RebuiltTask,
} from './task-events.ts';
export { rebuildTask } from './task-events.ts';
export type { Observer, ObserverHook, RunInfo, AttemptInfo } from './observers.ts';
export type { EventsOptions } from './event-stream.ts';
export type { SerializedError } from './serialize.ts';

// Lifecycle
export {
  TASK_STATUSES, LIFECYCLE_EVENTS, ALL_STATUSES, ALL_EVENTS, USER_EVENTS, FINISHED_STATUSES,
  transition, legalEvents, userEvents, sourcesOf, isFinished, isTaskStatus, lifecycleEdges, lifecycleDiagram,
} from './lifecycle.ts';
export type { TaskStatus, LifecycleEvent, LifecycleEffect, LifecycleState, Transition } from './lifecycle.ts';

// Errors
export {
  ERROR_CODES, StepwiseError, InvalidArgumentError, InvalidInputError, WorkflowNotFoundError, TaskNotFoundError,
  IllegalTransitionError, IdempotencyConflictError, ConcurrentUpdateError, NonDeterminismError, NotSerializableError,
  StepFailedError, StepTimeoutError, RetryableError, NonRetryableError, TaskFailedError, TaskCancelledError,
  LeaseLostError, WorkerStoppingError, SchemaMismatchError, StoreUnavailableError, ClosedError, TimeoutError,
  ForbiddenError, ConflictError, PayloadTooLargeError, ApprovalNotFoundError, TaskEndedError, ApprovalRequiredError, DwellTimeoutError, HTTP_STATUS, httpStatusOf, isStepwiseError, isRetryable,
} from './errors.ts';
export type { ErrorCode } from './errors.ts';

// Time, retries, stores
export { systemClock } from './clock.ts';
export type { Clock } from './clock.ts';
export { toMs, formatMs } from './duration.ts';
export type { Duration } from './duration.ts';
export type { RetryOptions } from './retry.ts';
export { DEFAULT_LIMITS } from './limits.ts';
export type { Limits } from './limits.ts';
export { openStore, DEFAULT_STORE_URL } from './store-url.ts';
export type { StoreOptions } from './store-url.ts';
export type { Store } from './store.ts';
