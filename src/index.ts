/**
 * @module stepwise
 * Durable execution for long-running AI-agent tasks: checkpointed steps, a lifecycle state
 * machine, leases with fencing, retries, cancellation, and crash resume, embedded on SQLite or
 * shared by many workers on PostgreSQL.
 *
 * This is the API a user writes against, and nothing else: the engine's internals (the store's
 * rows and writes, the run kernel, the classifier the engine applies) are imported by their own
 * paths inside the package. The surface is recorded in `api/*.api.md` (`npm run api:check`).
 * Model calls are `stepwise-engine/ai`; stores as classes `stepwise-engine/sqlite` and
 * `stepwise-engine/postgres`; the HTTP API and observers `stepwise-engine/server`; test tools
 * `stepwise-engine/testing`.
 */

// Defining workflows: `workflow(name, fn, options)` and what its code receives (`ctx`)
export { workflow, isWorkflow } from './workflow.ts';
export type {
  Workflow,
  WorkflowContext,
  WorkflowFunction,
  WorkflowOptions,
  StepContext,
  StepOptions,
  InputSchema,
  StandardSchemaLike,
  StandardResult,
  ForEachOptions,
  EventResult,
  WaitForEventOptions,
  JsonSafe,
  UsageReport,
  TransactionOptions,
} from './workflow.ts';
// Flow control: a limit per key (`concurrency: { key, limit }`)
export type { ConcurrencyKeyLimit } from './flow/options.ts';
export type { Transaction } from './transaction-types.ts';
export type { RetryOptions } from './retry.ts';

// Business state machines: states, events, guards, entry actions, timeouts (engine.send)
export { machine, isMachine } from './machine/machine.ts';
export { machineDiagram, machineGraph } from './machine/diagram.ts';
export type { MachineEdge, MachineGraph } from './machine/diagram.ts';
export type { MachineDefinition, StateConfig, Transition as MachineTransition, TransitionSpec, MachineEvent, EntryResult, EntryArgs } from './machine/types.ts';
export type { MachineInfo, MachineStep } from './machine/read.ts';
export type { SendResult } from './machine/send.ts';
export type { MachineOptions } from './machine/machine.ts';

// Running them: the engine (commands and reads), its options and results, and workers
export { Engine, TaskHandle, engineOf } from './engine.ts';
export type { StartManyItem } from './start-plan.ts';
export type { EngineOptions } from './commands/engine-options.ts';
export type {
  CommandOptions,
  MoveOptions,
  SignalOptions,
  SignalResult,
  By,
  StartOptions,
  StartResult,
  RetryTaskOptions,
  ForkOptions,
  ListOptions,
  ListResult,
  CountOptions,
  ResultOptions,
  Explanation,
} from './commands/options.ts';
export type { TaskDrift, DriftFilter, DriftReport } from './replay/drift.ts';
export type { DriftedCall } from './replay/replay-task.ts';
export { Worker } from './worker.ts';
export type { WorkerOptions, WorkerState } from './worker.ts';
export type { WorkerEvents, WorkerEventName } from './events.ts';

// Approvals (ctx.approval, engine.decide) and dwell bounds (WorkflowOptions.dwell)
export type {
  ApprovalOptions,
  ApprovalDecision,
  ApprovalDecisionRecord,
  ApprovalInfo,
  ApprovalStatus,
  ApprovalsQuery,
  ApprovalNotice,
  DecideOptions,
  TimeoutPolicy,
} from './approvals/types.ts';
export type { ApprovalEvent } from './approvals/events.ts';
export type { DwellOptions, DwellBound, DwellEvent } from './dwell/types.ts';

// Start options that name a task or tie it to a key (engine.start(…, { title, debounce, singleton }))
export type { DebounceOptions, SingletonOptions } from './api/start-keys.ts';
export type { Tags } from './api/tags.ts';
export type { Alert, AlertInfo, AlertKind, AlertOptions, AlertsQuery } from './alerts/types.ts';
export { ALERT_KINDS } from './alerts/types.ts';
export { BULK_ACTIONS, type BulkAction, type BulkOptions, type BulkResult } from './commands/bulk.ts';
export type { DebouncedEvent } from './task-events/debounce.ts';

// Reading tasks: engine.get / list, the event log, model usage, live events
export type { TaskInfo, TaskSummary, StepInfo, TaskLease, TaskUsage, RelatedTaskInfo } from './task-info.ts';
export type { ChildHandle, ChildOptions, ChildrenOptions } from './api/child.ts';
export type { AttemptUsage, AttemptOutcome, UsageTotals, Budget, PriceTable, ModelPrice, TokenCounts } from './ai/metering/usage.ts';
export type {
  TaskEvent,
  TaskEventType,
  Actor,
  StepRecord,
  TransitionEvent,
  StepEvent,
  StepsForgottenEvent,
  SignalReceivedEvent,
  SignalConsumedEvent,
  UsageEvent,
  UnknownEvent,
  RebuiltTask,
  IdempotencyTaskEvent,
} from './task-events.ts';
export { rebuildTask } from './task-events.ts';
export type { EventsOptions } from './event-stream.ts';
export type { StreamEvent, StreamFramesOptions } from './stream-frames.ts';
export type { SerializedError } from './serialize.ts';

// Observers: hooks called on every event, run and attempt (EngineOptions.observers)
export type { Observer, ObserverHook, RunInfo, AttemptInfo } from './observers.ts';

// Idempotency: records (engine.idempotency), business keys, backends (EngineOptions.idempotency)
export { Idempotency } from './idempotency/run.ts';
export type { IdempotencyRunOptions, IdempotencyRunContext, IdempotencyEvent } from './idempotency/run.ts';
export { hashKey } from './idempotency/keys.ts';
export type { VerifyAnswer, VerifyContext, EffectDecision } from './idempotency/at-most-once.ts';
export { RedisIdempotency } from './idempotency/redis.ts';
export type { RedisIdempotencyOptions, RedisClientLike } from './idempotency/redis.ts';
export type { IdempotencyBackend, IdempotencyRecord, AcquireRequest, AcquireResult, RecordStatus } from './idempotency/records.ts';

// Schedules: cron ticks that start one task each (engine.schedules)
export { Schedules } from './schedules/schedules.ts';
export type { ScheduleOptions, ScheduleInfo, ScheduleOverlap } from './api/schedules.ts';

// Rate limits: named limits in requests and tokens, shared by every worker (new Engine({ rateLimits }))
export type { RateLimitOptions, RateLimits, StepRateLimit, RateLimitTicket } from './api/rate-limits.ts';

// The task lifecycle as data and pure functions (statuses, events, the transition table)
export {
  TASK_STATUSES,
  LIFECYCLE_EVENTS,
  ALL_STATUSES,
  ALL_EVENTS,
  USER_EVENTS,
  FINISHED_STATUSES,
  transition,
  legalEvents,
  userEvents,
  sourcesOf,
  isFinished,
  isTaskStatus,
  lifecycleEdges,
  lifecycleDiagram,
} from './lifecycle.ts';
export type { TaskStatus, LifecycleEvent, LifecycleEffect, LifecycleState, Transition } from './lifecycle.ts';

// Errors: one class per condition, each with a stable `code`; checks that work on rebuilt errors
export {
  ERROR_CODES,
  HTTP_STATUS,
  httpStatusOf,
  isStepwiseError,
  isRetryable,
  StepwiseError,
  InvalidArgumentError,
  InvalidInputError,
  WorkflowNotFoundError,
  TaskNotFoundError,
  IllegalTransitionError,
  EventRefusedError,
  IdempotencyConflictError,
  IdempotencyInProgressError,
  ConcurrentUpdateError,
  NotSerializableError,
  ForbiddenError,
  ConflictError,
  PayloadTooLargeError,
  TimeoutError,
  NonDeterminismError,
  NestedStepError,
  StepFailedError,
  StepTimeoutError,
  RetryableError,
  NonRetryableError,
  RepairableError,
  OutputInvalidError,
  BudgetExceededError,
  TaskFailedError,
  SingletonRunningError,
  TaskCancelledError,
  DeadlineExceededError,
  CompensationFailedError,
  RerunUndoError,
  DwellTimeoutError,
  ChildFailedError,
  ChildDepthExceededError,
  LeaseLostError,
  WorkerStoppingError,
  SchemaMismatchError,
  StoreUnavailableError,
  StoreRefusedError,
  StoreDamagedError,
  ClosedError,
  ApprovalNotFoundError,
  ScheduleNotFoundError,
  TaskEndedError,
  ApprovalRequiredError,
  ApprovalExpiredError,
  ReplayCheckError,
  isReplayCheckError,
} from './errors.ts';
export type { ErrorCode, StepwiseErrorOptions, OutputIssue, ReplayFailure } from './errors.ts';

// Failure handling: a step's `classify` hook, output validation, reading failed attempts
export type { ErrorClass, FailureKind, ClassifyResult, Classifier } from './failure/classify.ts';
export { validateOutput } from './failure/validate.ts';
export { failedAttempts, describeClass } from './failure/attempts.ts';
export type { FailedAttempt } from './failure/attempts.ts';

// Retention: deleting finished tasks (engine.delete, engine.purge, EngineOptions.retention)
export { DELETABLE_STATUSES } from './retention/policy.ts';
export type { RetentionPolicy, DeletableStatus } from './retention/policy.ts';
export type { PurgeOptions, PurgeResult, TasksDeletedEvent } from './retention/purge.ts';
export type { DeletedTask } from './store.ts';

// Durations, clocks, limits
export { toMs, formatMs } from './duration.ts';
export type { Duration } from './duration.ts';
export { systemClock } from './clock.ts';
export type { Clock } from './clock.ts';
export { DEFAULT_LIMITS, PAYLOAD_STORE_LIMITS } from './limits.ts';
export type { Limits } from './limits.ts';

// Stores: a URL (`sqlite:<path>`, `postgres://…`) opened by the engine, or opened here
export { openStore, DEFAULT_STORE_URL } from './store-url.ts';
export type { StoreOptions } from './store-url.ts';
export type { Store } from './store.ts';

// The payload store: large values stored once, compressed, by what is new; codecs and blob backends
export { aesGcmCodec } from './payloads/codec.ts';
export type { PayloadCodec, AesGcmCodecOptions } from './payloads/codec.ts';
export { directoryBackend } from './payloads/backends.ts';
export type { BlobBackend } from './payloads/backends.ts';
export { s3Backend } from './payloads/s3.ts';
export type { S3BackendOptions, S3ClientLike } from './payloads/s3.ts';
export type { PayloadOptions } from './payloads/options.ts';
