/**
 * @module stepwise
 * Durable execution for long-running AI-agent tasks: checkpointed steps, a lifecycle state
 * machine, leases with fencing, retries, cancellation, and crash resume, embedded on SQLite or
 * shared by many workers on PostgreSQL.
 */

// Defining workflows
export { workflow, isWorkflow } from './workflow.ts';
export type {
  Workflow, WorkflowContext, WorkflowFunction, WorkflowOptions, StepContext, StepOptions, InputSchema, StandardSchemaLike, StandardResult, ForEachOptions,
  EventResult, WaitForEventOptions, JsonSafe, UsageReport, TransactionOptions,
} from './workflow.ts';
export type { Transaction } from './transaction-types.ts';

// Business state machines: states, events, guards, entry actions, timeouts (engine.send)
export { machine, isMachine } from './machine/machine.ts';
export { machineDiagram, machineGraph } from './machine/diagram.ts';
export type { MachineEdge, MachineGraph } from './machine/diagram.ts';
export type { MachineDefinition, StateConfig, Transition as MachineTransition, TransitionSpec, MachineEvent, EntryResult, EntryArgs } from './machine/types.ts';
export type { MachineInfo, MachineStep } from './machine/read.ts';
export type { SendResult } from './machine/send.ts';
export type { MachineOptions } from './machine/machine.ts';

// Running them
export { Engine, TaskHandle } from './engine.ts';
export type { StartManyItem } from './start-plan.ts';
export type { EngineOptions, CommandOptions, SignalOptions, SignalResult, By, StartOptions, StartResult, RetryTaskOptions, ListOptions, ListResult, CountOptions, ResultOptions, Explanation } from './engine.ts';
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
export type { TaskInfo, TaskSummary, StepInfo, TaskLease, TaskUsage } from './task-info.ts';
export type { AttemptUsage, AttemptOutcome, UsageTotals, Budget, PriceTable, ModelPrice, TokenCounts } from './ai/metering/usage.ts';
export type {
  TaskEvent, TaskEventType, Actor, StepRecord, TransitionEvent, StepEvent, StepsForgottenEvent, SignalReceivedEvent,
  SignalConsumedEvent, UsageEvent, UnknownEvent, RebuiltTask, IdempotencyTaskEvent,
} from './task-events.ts';
export { rebuildTask } from './task-events.ts';
export type { Observer, ObserverHook, RunInfo, AttemptInfo } from './observers.ts';
export type { EventsOptions } from './event-stream.ts';
export type { StreamEvent } from './stream-frames.ts';
export type { SerializedError } from './serialize.ts';

// Idempotency: records (engine.idempotency), business keys, backends
export { Idempotency } from './idempotency/run.ts';
export type { IdempotencyRunOptions, IdempotencyRunContext, IdempotencyEvent } from './idempotency/run.ts';
export { hashKey } from './idempotency/keys.ts';
export type { VerifyAnswer, VerifyContext, EffectDecision } from './idempotency/at-most-once.ts';
export { RedisIdempotency } from './idempotency/redis.ts';
export type { RedisIdempotencyOptions, RedisClientLike } from './idempotency/redis.ts';
export type { IdempotencyBackend, IdempotencyRecord, AcquireRequest, AcquireResult, RecordStatus } from './idempotency/records.ts';

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
  StepFailedError, StepTimeoutError, RetryableError, NonRetryableError, BudgetExceededError, TaskFailedError, TaskCancelledError,
  LeaseLostError, WorkerStoppingError, SchemaMismatchError, StoreUnavailableError, StoreRefusedError, ClosedError, TimeoutError,
  ForbiddenError, ConflictError, PayloadTooLargeError, IdempotencyInProgressError,
  ApprovalNotFoundError, TaskEndedError, ApprovalRequiredError, DwellTimeoutError, EventRefusedError, HTTP_STATUS, httpStatusOf, isStepwiseError, isRetryable,
} from './errors.ts';
export type { ErrorCode } from './errors.ts';

// Failure handling: error classification, output validation
export { RepairableError, OutputInvalidError, DeadlineExceededError, CompensationFailedError } from './errors.ts';
export type { OutputIssue } from './errors.ts';
export { classifyDefault, classifyError, isRetryableStatus, retryAfterMsOf } from './failure/classify.ts';
export type { ErrorClass, FailureKind, ClassifyResult, Classifier } from './failure/classify.ts';
export { validateOutput } from './failure/validate.ts';
export { failedAttempts, describeClass } from './failure/attempts.ts';
export type { FailedAttempt } from './failure/attempts.ts';

// Retention: deleting finished tasks (engine.delete, engine.purge, EngineOptions.retention)
export { DELETABLE_STATUSES } from './retention/policy.ts';
export type { RetentionPolicy, DeletableStatus } from './retention/policy.ts';
export type { PurgeOptions, PurgeResult, TasksDeletedEvent } from './retention/purge.ts';
export type { DeletedTask } from './store.ts';

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
export type { Store, NewTask, WakeEvent, WriteOp } from './store.ts';
