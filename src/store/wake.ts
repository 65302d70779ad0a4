/**
 * @module store/wake
 * Wake-ups: what a write announces to other processes, and the capability of a store that carries them (PostgreSQL LISTEN/NOTIFY).
 */

/** Why a woken worker should look again: what changed. */
export type WakeReason = 'task' | 'cancel' | 'pause' | 'resume' | 'settled';
export interface WakeEvent {
  reason: WakeReason;
  /** The task; `'*'` means "anything may have changed" (sent after a listener reconnects: poll). */
  taskId: string;
  /**
   * A batch's tasks, when one notification stands for several (then `taskId` is `'*'`, so that a
   * listener that does not know this field looks at everything).
   */
  taskIds?: string[];
  workflow?: string;
  /** With `reason: 'cancel'`: the user's reason. */
  cancelReason?: string | null;
  /**
   * The engine that announced it, when that engine has told its own workers already (its
   * subscription then ignores the echo).
   */
  origin?: string;
}

/**
 * What a subscriber hears. `'work'` (the default): a task became runnable, or was cancelled,
 * paused or resumed — what workers act on. `'settled'`: a task finished — what `engine.result()`
 * waits for. Kept apart so that workers, which never wait for results, are not sent a message
 * for every task that any worker finishes.
 */
export type WakeTopic = 'work' | 'settled';

/** The topic of a wake-up event. */
export function topicOf(event: WakeEvent): WakeTopic {
  return event.reason === 'settled' ? 'settled' : 'work';
}

/** Cross-process wake-ups; stores without a channel leave both out. */
export interface WakeStore {
  /**
   * Subscribes to wake-ups from other processes, of one topic: on PostgreSQL (LISTEN/NOTIFY) the
   * `notify` events of writes committed anywhere; on SQLite, `taskId: '*'` ("anything may have
   * changed") whenever another connection has committed to the file. Stores without a
   * cross-process channel do not implement it; callers then rely on polling and heartbeats.
   */
  subscribe?(listener: (event: WakeEvent) => void, topic?: WakeTopic): Promise<(() => Promise<void>) | null>;
  /** Announces a change to other processes (no-op where unsupported). */
  notify?(event: WakeEvent): Promise<void>;
}
