/**
 * @module api/idempotency
 * What observers hear of idempotency records (`Observer.onIdempotency`): a hit, a conflict or a
 * take-over. A type of the public API, so that observers need not import the records' module.
 */
import type { IdempotencyBackend } from '../idempotency/records.ts';

/** A hit, a conflict or a take-over (observers' `onIdempotency`; in a task's log as `idempotency:<type>`). */
export interface IdempotencyEvent {
  type: 'hit' | 'conflict' | 'takeover';
  key: string;
  backend: IdempotencyBackend['kind'];
  at: number;
  taskId: string | null;
  /** The step that met it, inside a workflow. */
  step?: string;
  /** A take-over: the owner whose lease had run out. A hit or conflict: the task that ran it, if any. */
  previousOwner?: string | null;
  ranByTask?: string | null;
}
