/**
 * @module task-events/observed
 * News observers hear that is not (only) a task's log entry: idempotency records met, and batches
 * of deleted tasks (a deleted task keeps no log of its own).
 */
import type { DeletedTask } from '../store.ts';
import type { Actor } from './actor.ts';

/** A hit, a conflict or a take-over (observers' `onIdempotency`; in a task's log as `idempotency:<type>`). */
export interface IdempotencyEvent {
  type: 'hit' | 'conflict' | 'takeover';
  key: string;
  /** Where the record is kept: the engine's own database, or Redis. */
  backend: 'sqlite' | 'postgres' | 'redis';
  at: number;
  taskId: string | null;
  /** The step that met it, inside a workflow. */
  step?: string;
  /** A take-over: the owner whose lease had run out. A hit or conflict: the task that ran it, if any. */
  previousOwner?: string | null;
  ranByTask?: string | null;
}

/** A batch of tasks deleted, for observers: what, why, and who asked. */
export interface TasksDeletedEvent {
  tasks: DeletedTask[];
  /** `delete`: one task by `engine.delete`; `purge`: `engine.purge`; `retention`: a worker's sweep. */
  reason: 'delete' | 'purge' | 'retention';
  by: Actor;
  at: number;
}
