/**
 * @module store/keyed-starts
 * Starts that depend on the tasks already holding a key, each atomic against concurrent starts and
 * claims: a debounced start (one unclaimed task per workflow and debounce key, whose input and due
 * time a later start replaces) and a singleton start (one live task per workflow and singleton key).
 */
import type { NewEvent } from './log.ts';
import type { TaskRow } from './rows.ts';
import type { NewTask } from './tasks.ts';
import type { WakeEvent } from './wake.ts';

/** What a debounced start writes when a task of its workflow and key is still unclaimed. */
export interface DebounceWrite {
  /**
   * The latest due time from the task's creation (`maxWait`), or null: the task is due at the
   * earlier of `task.runAt` and `createdAt + maxWaitMs`.
   */
  maxWaitMs: number | null;
  /** The entry appended to the existing task's log (`task:debounced`). */
  log: NewEvent;
}

/** What a singleton start found. */
export interface SingletonAnswer {
  task: TaskRow;
  created: boolean;
  /**
   * Why no task was created: `idempotency`, the start's idempotency key names `task` (of any
   * status); `singleton`, `task` is the live task holding the singleton key.
   */
  held?: 'idempotency' | 'singleton';
}

export interface KeyedStartStore {
  /**
   * `task` (with `debounceKey`) is inserted unless a task of its workflow and debounce key is
   * still unclaimed (`runs = 0`, pending or paused): then that task gets `task.input` (and
   * `task.title` unless null), its due time
   * moves to `task.runAt` (bounded by `write.maxWaitMs` from its creation), its version is bumped
   * and `write.log` is appended, and it comes back with `created: false`. A claim and this write
   * never interleave: a task claimed first is left alone and a new one is inserted.
   */
  startDebounced(task: NewTask, write: DebounceWrite, notify?: WakeEvent): Promise<{ task: TaskRow; created: boolean }>;
  /**
   * `task` (with `singletonKey`) is inserted unless its idempotency key names a task (that task
   * comes back, `held: 'idempotency'`) or a live task (not succeeded, failed or cancelled) of its
   * workflow holds its singleton key (that task comes back, `held: 'singleton'`).
   */
  startSingleton(task: NewTask, notify?: WakeEvent): Promise<SingletonAnswer>;
  /** The live task of `workflow` holding the singleton key `key`, or null. */
  liveSingleton(workflow: string, key: string): Promise<TaskRow | null>;
  /** The unclaimed task of `workflow` holding the debounce key `key` (the one a debounced start lands in), or null. */
  unclaimedDebounced(workflow: string, key: string): Promise<TaskRow | null>;
}
