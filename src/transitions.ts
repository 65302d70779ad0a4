/**
 * @module transitions
 * Internal: not part of the public API (the package exports only its index modules).
 * The one function through which every status write passes: it asks the lifecycle table for the
 * edge (throwing IllegalTransitionError if there is none), turns the edge's effects into columns,
 * and returns the guarded write for the store, which re-checks the source status atomically and
 * appends its log entries in the same transaction.
 */
import { CREATION, isFinished, transition, type LifecycleEvent, type LifecycleState, type TaskStatus, type Transition } from './lifecycle.ts';
import { transitionEntry } from './log-entries.ts';
import type { ActorKind, NewEvent, StepRow, TaskPatch, TaskRow, TransitionWrite, WakeEvent, WriteGuard } from './store.ts';

export interface TransitionInput {
  taskId: string;
  state: LifecycleState;
  event: LifecycleEvent;
  guard: WriteGuard;
  at: number;
  set?: TaskPatch;
  detail?: unknown;
  workerId?: string | null;
  /** Who causes it; default: the worker `workerId`, else an anonymous user. */
  actor?: { kind: ActorKind; id: string };
  steps?: readonly StepRow[];
  deleteSteps?: readonly number[];
  consume?: readonly { signalId: number; seq: number }[];
  /** Computes the cross-process announcement of this transition from its edge. */
  notify?: (edge: Transition) => WakeEvent | undefined;
  /** The task's parent (`TaskRow.parentId`): a transition that finishes the task signals it (see {@link childEndSignal}). */
  parentId?: string | null;
}

/** The name of the signal a finished child task sends its parent: `child:<child id>`. */
export function childEndSignal(childId: string): string {
  return `child:${childId}`;
}

/** The status a new task gets and the log entry of its creation, by `actor`. */
export function planCreation(actor: { kind: ActorKind; id: string }): { status: TaskStatus; log: NewEvent } {
  return { status: CREATION.to, log: transitionEntry(actor.kind, actor.id, { event: CREATION.event, from: null, to: CREATION.to }) };
}

/** The lifecycle edge plus the store write that performs it. */
export function planTransition(input: TransitionInput): { edge: Transition; write: TransitionWrite } {
  const edge = transition(input.state, input.event, input.taskId);
  // effectColumns builds a fresh object: the caller's columns go onto it.
  const set: TaskPatch = input.set ? Object.assign(effectColumns(edge, input.at), input.set) : effectColumns(edge, input.at);
  const detail = input.detail === undefined ? null : JSON.stringify(input.detail);
  const actor = input.actor ?? (input.workerId ? { kind: 'worker' as const, id: input.workerId } : { kind: 'user' as const, id: 'anonymous' });
  const write: TransitionWrite = {
    kind: 'transition',
    taskId: input.taskId,
    event: input.event,
    from: [edge.from],
    to: edge.to,
    guard: input.guard,
    set,
    at: input.at,
    workerId: input.workerId ?? null,
    detail,
    log: [
      transitionEntry(actor.kind, actor.id, {
        event: input.event,
        from: edge.from,
        to: edge.to,
        detail,
        output: set.output ?? null,
        error: set.error ?? null,
      }),
    ],
  };
  if (edge.pauseRequested !== undefined) write.pauseRequested = edge.pauseRequested;
  if (input.steps?.length) write.steps = input.steps;
  if (input.deleteSteps?.length) write.deleteSteps = input.deleteSteps;
  if (input.consume?.length) write.consume = input.consume;
  const notify = input.notify?.(edge);
  if (notify) write.notify = notify;
  if (input.parentId && isFinished(edge.to)) write.parentSignal = { taskId: input.parentId, name: childEndSignal(input.taskId) };
  return { edge, write };
}

/** The columns an edge's effects write. */
export function effectColumns(edge: Transition, at: number): TaskPatch {
  const set: TaskPatch = {};
  for (const effect of edge.effects) {
    switch (effect) {
      case 'release-lease':
        set.clearLease = true;
        break;
      case 'expire-lease':
        set.expireLease = true;
        break;
      case 'fence':
        set.expireLease = true;
        set.incrementEpoch = true;
        break;
      case 'finish':
        set.finishedAt = at;
        break;
      case 'schedule-now':
        set.runAt = at;
        break;
      case 'request-pause':
        set.pauseRequested = true;
        break;
      case 'clear-pause-request':
        set.pauseRequested = false;
        break;
      case 'acquire-lease': // performed by the store's claim
      case 'abort-run': // a notification to the worker holding the task, not a column
        break;
    }
  }
  // Leaving `waiting` or `paused` for any status forgets what the task waited for.
  if (edge.from !== edge.to && (edge.from === 'waiting' || edge.from === 'paused')) {
    set.wait = null;
    set.waitEvents = null;
  }
  return set;
}

/**
 * What other processes should hear about a transition of task `taskId`: a finished task wakes
 * `result()` callers; a cancel of a running task reaches the worker that holds it; a pause
 * request or its withdrawal reaches that worker; a task made runnable (or left for a worker to
 * reclaim at once, to run its cleanup) wakes idle workers.
 */
export function wakeFor(edge: Transition, taskId: string, workflow: string, cancelReason?: string | null): WakeEvent | undefined {
  if (isFinished(edge.to)) return { reason: 'settled', taskId, workflow };
  if (edge.effects.includes('abort-run')) return { reason: 'cancel', taskId, workflow, cancelReason: cancelReason ?? null };
  if (edge.effects.includes('request-pause')) return { reason: 'pause', taskId, workflow };
  if (edge.effects.includes('clear-pause-request') && edge.event === 'resume' && edge.to === 'running') return { reason: 'resume', taskId, workflow };
  if (edge.to === 'pending' || edge.effects.includes('schedule-now') || edge.effects.includes('expire-lease') || edge.effects.includes('fence')) return { reason: 'task', taskId, workflow };
  return undefined;
}

/** The local wake-up for tasks just created: one event for all of them. */
export function batchWakeOfRows(tasks: readonly Pick<TaskRow, 'id' | 'workflow'>[]): WakeEvent | undefined {
  const [first] = tasks;
  if (!first) return undefined;
  if (tasks.length === 1) return { reason: 'task', taskId: first.id, workflow: first.workflow };
  for (const t of tasks) if (t.workflow !== first.workflow) return { reason: 'task', taskId: '*' };
  return { reason: 'task', taskId: '*', workflow: first.workflow };
}
