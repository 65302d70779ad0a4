/**
 * @module task-events/dwell
 * Dwell timeouts as users read them: the `dwell:exceeded` entry of a task's log, and the alert
 * observers hear (`onDwellAlert`). The bounds themselves are a workflow option (dwell/types.ts).
 */

/** What is done once a task stays past a dwell bound. */
export type DwellOutcome = 'fail' | 'cancel' | 'alert';

/** A `dwell:exceeded` entry of the task's log: a bound passed, and what was done about it. */
export interface DwellEvent {
  taskId: string;
  seq: number;
  at: number;
  actor: { kind: 'user' | 'worker' | 'system'; id: string };
  type: 'dwell:exceeded';
  status: 'waiting' | 'paused' | 'running';
  afterMs: number;
  /** When the task entered the status (for `running`: its last progress). */
  since: number;
  outcome: DwellOutcome;
}

/** A task stayed past a dwell bound whose outcome is `alert` (the `onDwellAlert` hook of observers). */
export interface DwellAlert {
  taskId: string;
  workflow: string;
  /** The status it stayed in (`running`: without progress). */
  status: 'waiting' | 'paused' | 'running';
  afterMs: number;
  /** When the stay (or the stall) began. */
  since: number;
  /** When the alert was raised. */
  at: number;
}

export function toDwellEvent(base: { taskId: string; seq: number; at: number; actor: DwellEvent['actor'] }, data: Record<string, unknown>): DwellEvent {
  return {
    ...base,
    type: 'dwell:exceeded',
    status: data.status as DwellEvent['status'],
    afterMs: Number(data.afterMs),
    since: Number(data.since),
    outcome: data.outcome as DwellEvent['outcome'],
  };
}
