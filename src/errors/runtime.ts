/**
 * @module errors/runtime
 * Errors of the machinery under the tasks: a worker that lost its lease or is stopping, a database
 * that is unreachable, refuses a write or has another schema, and anything used after it closed.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError, type StepwiseErrorOptions } from './base.ts';

/** The worker lost its lease on a task (another worker took it over); its writes are refused. */
export class LeaseLostError extends StepwiseError {
  readonly taskId: string;
  readonly epoch: number;
  constructor(taskId: string, epoch: number) {
    super(ERROR_CODES.LEASE_LOST, `Lost the lease on task ${taskId} (epoch ${epoch}): another worker owns it now; this run's writes are refused.`);
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

/**
 * The database's files are not the ones the store opened, or the database is corrupt: its
 * write-ahead log or main file was removed or replaced while it was open, or SQLite met a damaged
 * page. Not retryable: every later operation of that store fails the same way, so that nothing is
 * committed to files that would not be read again. `path`: the database file.
 */
export class StoreDamagedError extends StepwiseError {
  readonly path: string;
  constructor(message: string, options: StepwiseErrorOptions & { path: string }) {
    super(ERROR_CODES.STORE_DAMAGED, message, { ...options, retryable: false });
    this.name = 'StoreDamagedError';
    this.path = options.path;
  }
}

export class ClosedError extends StepwiseError {
  constructor(what: string) {
    super(ERROR_CODES.CLOSED, `${what} is closed.`);
    this.name = 'ClosedError';
  }
}
