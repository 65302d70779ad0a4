/**
 * @module store/signals
 * Signals sent to tasks.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { ActorKind } from './log.ts';
import type { SignalRow } from './rows.ts';
import type { WakeEvent } from './wake.ts';

export interface SignalWrite {
  taskId: string;
  name: string;
  payload: string | null;
  idempotencyKey: string | null;
  at: number;
  /** Who sent it (recorded in the `signal:received` entry). */
  actorKind: ActorKind;
  actorId: string;
  /** Announced to other processes if the signal was recorded. */
  notify?: WakeEvent;
  /**
   * Record it only if the task is `waiting` for an event of this name (else `refused`, nothing
   * written), and then stop waiting for any event: the task is due, and a second such signal is
   * refused until it waits again. Checked and written in one transaction (the events of a state
   * machine: one accepted per wait).
   */
  onlyIfAwaited?: boolean;
}

/** What `insertSignal` answers: a new signal recorded (or its key known), or refused by `onlyIfAwaited`. */
export interface SignalInsert {
  created: boolean;
  /** Set when `onlyIfAwaited` refused it: the task's status and the events it waited for. */
  refused?: { status: TaskStatus; waitEvents: string[] };
}

/** Recording and reading signals. */
export interface SignalStore {
  /**
   * Records a signal (deduplicated by `(taskId, idempotencyKey)`) and, if the task is waiting for
   * an event of that name, makes it due at `at`. Returns whether a new signal was recorded (or
   * why `onlyIfAwaited` refused it), or `null` if the task does not exist.
   */
  insertSignal(signal: SignalWrite): Promise<SignalInsert | null>;
  getSignals(taskId: string): Promise<SignalRow[]>;
  /** The signal of the task recorded with this idempotency key, if any (one indexed row, however many signals the task has). */
  getSignalByKey(taskId: string, idempotencyKey: string): Promise<SignalRow | undefined>;
  /** The task's signals not consumed yet with an id above `afterId`, in id order (a running task's new signals, without its consumed history). */
  pendingSignals(taskId: string, afterId: number): Promise<SignalRow[]>;
}
