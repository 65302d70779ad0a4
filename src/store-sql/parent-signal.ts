/**
 * @module store-sql/parent-signal
 * Internal: not part of the public API.
 * The signal a finished child task's transition sends its parent (`TransitionWrite.parentSignal`),
 * built once for both stores from the updated row: the child's status, output and error.
 */
import type { SignalWrite, TaskRow, WakeEvent } from '../store.ts';

/** The wake-up a child's end sends its parent's workers. */
export function parentSignalNotify(to: { taskId: string }): WakeEvent {
  return { reason: 'task', taskId: to.taskId };
}

export function parentSignalWrite(to: { taskId: string; name: string }, row: Pick<TaskRow, 'id' | 'status' | 'output' | 'error'>, at: number): SignalWrite {
  return {
    taskId: to.taskId,
    name: to.name,
    // Output and error are JSON text already: spliced in as they are.
    payload: `{"status":${JSON.stringify(row.status)},"output":${row.output ?? 'null'},"error":${row.error ?? 'null'}}`,
    idempotencyKey: to.name,
    at,
    actorKind: 'system',
    actorId: `task:${row.id}`,
    notify: parentSignalNotify(to),
  };
}
