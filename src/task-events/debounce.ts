/**
 * @module task-events/debounce
 * A debounced start that reached a task not yet claimed: the `task:debounced` entry of that task's
 * log (the start's input replaced the task's, and its due time moved), as stored and as read.
 */
import type { NewEvent } from '../store.ts';
import type { Actor } from './actor.ts';

export const DEBOUNCED_ENTRY = 'task:debounced';

/** A later start with the task's debounce key: the task now has this input and is due at `runAt`. */
export interface DebouncedEvent {
  taskId: string;
  seq: number;
  at: number;
  actor: Actor;
  type: 'task:debounced';
  /** The debounce key. */
  key: string;
  /** The input the task now has (the start's). */
  input: unknown;
  /** When the task is now due. */
  runAt: number;
}

/** The stored entry; `input` is the start's encoded input (JSON text, or null for none). */
export function debouncedEntry(actor: Actor, key: string, input: string | null, runAt: number): NewEvent {
  return { type: DEBOUNCED_ENTRY, actorKind: actor.kind, actorId: actor.id, data: `{"key":${JSON.stringify(key)},"input":${input ?? 'null'},"runAt":${runAt}}` };
}

export function toDebouncedEvent(base: { taskId: string; seq: number; at: number; actor: Actor }, data: Record<string, unknown>): DebouncedEvent {
  return { ...base, type: 'task:debounced', key: String(data.key), input: data.input ?? undefined, runAt: Number(data.runAt) };
}
