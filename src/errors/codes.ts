/**
 * @module errors/codes
 * The one table of error codes: every code Stepwise's errors carry (`ERROR_CODES`) and the HTTP
 * status each one answers with (`HTTP_STATUS`). A new error adds its code here first.
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
  /** A durable call (`ctx.step`, a model call, `ctx.sleep` …) was made inside another step's function. */
  NESTED_STEP: 'NESTED_STEP',
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
  /** The database's files were removed, replaced or found corrupt under a running engine: it stops writing, and a person must restore them. */
  STORE_DAMAGED: 'STORE_DAMAGED',
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
  /**
   * A re-run that undoes first (`retry(id, { fromStep, compensate: true })`): its first run replays
   * the code, refusing every new call with this error, and runs the compensations of the steps it forgets.
   */
  RERUN_UNDOING: 'RERUN_UNDOING',
  /** A state machine does not take this event now (not one of its state's events, a guard said no, or it is busy). */
  EVENT_REFUSED: 'EVENT_REFUSED',
  /** `checkResume` (stepwise-engine/testing): a workflow ended otherwise after a crash, ran a durable step again, … */
  RESUME_CHECK_FAILED: 'RESUME_CHECK_FAILED',
  /** `checkReplay` (stepwise-engine/testing): the current code does not replay a recorded task as it ran. */
  REPLAY_CHECK_FAILED: 'REPLAY_CHECK_FAILED',
  /** A singleton start (`engine.start(…, { singleton })`) while a live task of its workflow holds the key. */
  SINGLETON_RUNNING: 'SINGLETON_RUNNING',
  /** A child task (`ctx.child`, `handle.result()`) failed or was cancelled: its id, code and message are on the error. */
  CHILD_FAILED: 'CHILD_FAILED',
  /** A child task would be deeper in its tree than `limits.childDepth` allows (runaway recursion). */
  CHILD_DEPTH_EXCEEDED: 'CHILD_DEPTH_EXCEEDED',
  /** A stored payload cannot be read back: its blob is missing, its codec key is not configured, or its bytes do not authenticate. */
  PAYLOAD_UNREADABLE: 'PAYLOAD_UNREADABLE',
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
  PAYLOAD_UNREADABLE: 500,
  STORE_REFUSED: 422,
  STORE_DAMAGED: 500,
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
  NESTED_STEP: 409,
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
  RERUN_UNDOING: 409,
  EVENT_REFUSED: 409,
  RESUME_CHECK_FAILED: 500,
  REPLAY_CHECK_FAILED: 409,
  SINGLETON_RUNNING: 409,
  CHILD_FAILED: 409,
  CHILD_DEPTH_EXCEEDED: 422,
});
