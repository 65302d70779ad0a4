/**
 * @module local-bus
 * Internal: not part of the public API (the package exports only its index modules).
 * In-process notifications between an engine and its workers: a task became runnable, was
 * cancelled, paused or resumed, or a run settled. Across processes the same news travels through
 * the store (PostgreSQL LISTEN/NOTIFY) or is found by polling and heartbeats.
 */
import { TypedEmitter } from './events.ts';
import type { TaskRow } from './store.ts';
import type { TaskStatus } from './lifecycle.ts';

export interface LocalBusEvents {
  'task:ready': { taskId: string; workflow: string | null };
  'task:cancel': { taskId: string; reason: string | null };
  'task:pause': { taskId: string };
  'task:resume': { taskId: string };
  /**
   * A run ended or a task changed where a waiter may want to look again. `status`: the task's
   * status when known (`lease-lost`: a run that ended without writing); `row`: the task's row as
   * the write that finished it committed it (given only by that write's process, only for a
   * finished task).
   */
  'task:settled': { taskId: string; status?: TaskStatus | 'lease-lost'; row?: TaskRow };
  /** Entries of the task's event log were committed by this process. */
  'log:appended': { taskId: string };
}

/**
 * Every `result()` and `events()` reader of the process waits here (each removes its listener when
 * it is done), so their number is the number of waiting callers, not a leak: no listener limit.
 */
export class LocalBus extends TypedEmitter<LocalBusEvents> {
  constructor() {
    super(0);
  }
}
