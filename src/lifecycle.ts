/**
 * @module lifecycle
 * The task lifecycle: the one table of legal transitions, as a pure function. Nothing else in
 * Stepwise decides a task's next status; the engine and the worker ask {@link transition} and hand
 * the answer to the store, which re-checks it atomically (`UPDATE … WHERE status IN (<sources>)`)
 * and appends the transition's log entry in the same transaction.
 *
 * A running task can carry a pause request (`pauseRequested`): the run stops at its next step
 * boundary and then `suspend`s to `paused`. It is part of the state the table looks at, because
 * "pause" and "resume" are legal on a running task only without, respectively with, that request.
 */
import { IllegalTransitionError } from './errors.ts';

export const TASK_STATUSES = Object.freeze({
  pending: 'pending',
  running: 'running',
  waiting: 'waiting',
  paused: 'paused',
  cancelling: 'cancelling',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
} as const);
export type TaskStatus = (typeof TASK_STATUSES)[keyof typeof TASK_STATUSES];
export const ALL_STATUSES: readonly TaskStatus[] = Object.freeze(Object.values(TASK_STATUSES));

/** Statuses a task leaves only when a user retries it (`retry`; from a named step unless it failed). */
export const FINISHED_STATUSES: readonly TaskStatus[] = Object.freeze(['succeeded', 'failed', 'cancelled']);
/** Statuses in which a worker holds a lease on the task. */
export const LEASED_STATUSES: readonly TaskStatus[] = Object.freeze(['running', 'cancelling']);

export const LIFECYCLE_EVENTS = Object.freeze({
  /** A worker takes a due pending or waiting task. */
  claim: 'claim',
  /**
   * A worker takes a running or cancelling task whose lease expired (its worker died or stalled).
   * A cancelling task stays cancelling: the new run only finishes its cleanup (see `run/cleanup.ts`).
   */
  reclaim: 'reclaim',
  /** The run waits (sleep, long retry backoff): no worker slot is held until `run_at`. */
  park: 'park',
  /**
   * A stopping worker hands the task back so another worker resumes it at once. From `cancelling`:
   * a run that ended without cleaning up after a cancel that came as it ended hands the task over
   * to a run that does.
   */
  release: 'release',
  /** The run reached a step boundary after a pause request. */
  suspend: 'suspend',
  complete: 'complete',
  /**
   * The run failed for good. From `cancelling` only when the cleanup after the cancel failed for
   * good (a `CompensationFailedError`): what the task did is not fully undone.
   */
  fail: 'fail',
  /**
   * User: stop the task. Immediate, unless it is running or its last run left cleanup to do: then
   * it goes through `cancelling` while a worker runs that cleanup.
   */
  cancel: 'cancel',
  /** The cancelled run stopped and its cleanup is done. */
  abort: 'abort',
  /** User: stop at the next step boundary (running) or stay put (pending, waiting). */
  pause: 'pause',
  /** User: continue a paused task, or withdraw a pause request not yet honoured. */
  resume: 'resume',
  /** User: run a failed task again from the step that failed. */
  retry: 'retry',
  /**
   * The dwell scanner: a waiting or paused task stayed longer than its workflow allows (`dwell`).
   * It fails, at once or, with compensations to run, through a worker (see the table). A running
   * task that made no progress for too long (`dwell.running`) is taken from its run and failed by
   * the worker that reclaims it.
   */
  expire: 'expire',
} as const);
export type LifecycleEvent = (typeof LIFECYCLE_EVENTS)[keyof typeof LIFECYCLE_EVENTS];
export const ALL_EVENTS: readonly LifecycleEvent[] = Object.freeze(Object.values(LIFECYCLE_EVENTS));

/**
 * A task's creation: the status every task starts in, and the event its log records. It is not an
 * edge of the table (there is no status before it), but it is decided here like every other status.
 */
export const CREATION: Readonly<{ event: 'create'; to: TaskStatus }> = Object.freeze({ event: 'create', to: 'pending' });

/** The events a user may send; the rest are sent by workers. */
export const USER_EVENTS: readonly LifecycleEvent[] = Object.freeze(['cancel', 'pause', 'resume', 'retry']);

/**
 * What a transition does besides changing status; the engine turns effects into column writes.
 * - `acquire-lease`: set lease owner and expiry, bump the fencing epoch.
 * - `release-lease`: clear the lease (the epoch stays, so the old holder stays fenced off).
 * - `expire-lease`: no owner, and a lease that expires now: a worker reclaims the task at once.
 * - `fence`: `expire-lease`, and a new fencing epoch: the run that held the task may write nothing more.
 * - `abort-run`: tell the worker that holds the task to fire the run's AbortSignal.
 * - `request-pause` / `clear-pause-request`: set or clear the pause request of a running task.
 * - `schedule-now`: make the task due at once.
 * - `finish`: stamp `finished_at`.
 */
export type LifecycleEffect = 'acquire-lease' | 'release-lease' | 'expire-lease' | 'fence' | 'abort-run' | 'request-pause' | 'clear-pause-request' | 'schedule-now' | 'finish';

/** What the task must be for an edge to apply; an edge without conditions always applies. */
interface Condition {
  /** The running task has (true) or has not (false) a pause request. */
  readonly pauseRequested?: boolean;
  /** The task's last run left cleanup registered (onCancel handlers, compensations): true, or none: false. */
  readonly hasCleanup?: boolean;
}

interface Edge {
  readonly to: TaskStatus;
  readonly effects: readonly LifecycleEffect[];
  readonly when?: Condition;
}

const e = (to: TaskStatus, effects: LifecycleEffect[] = [], when?: Condition): Edge => (when === undefined ? { to, effects } : { to, effects, when });

/**
 * A cancel of a task no worker holds: immediate, unless its last run left cleanup to do
 * (`ctx.onCancel` handlers, completed steps with compensations). Then it goes through `cancelling`
 * with a lease that has already expired, so a worker serving its workflow reclaims it, replays its
 * code (its calls now reject with the cancel) and runs that cleanup, as for a running task.
 */
const cancelUnheld: readonly Edge[] = [e('cancelled', ['finish'], { hasCleanup: false }), e('cancelling', ['expire-lease'], { hasCleanup: true })];

/**
 * `expire` (the dwell scanner fails a task that stayed waiting or paused too long): at once, unless
 * the task's last run left compensations to run. Then the scanner writes the task's error and the
 * task is made due (a paused one pending again); the worker that claims it fails the run with that
 * error at its start, after its code has replayed what it recorded, and the compensations run
 * (see `failure/failed-outside.ts`).
 *
 * The table. Rows are statuses, columns events; a missing cell is an illegal transition. A cell
 * with several edges picks the one whose condition the task meets.
 */
const TABLE: Readonly<Record<TaskStatus, Partial<Record<LifecycleEvent, Edge | readonly Edge[]>>>> = {
  pending: {
    claim: e('running', ['acquire-lease']),
    cancel: cancelUnheld,
    pause: e('paused'),
  },
  waiting: {
    claim: e('running', ['acquire-lease']),
    cancel: cancelUnheld,
    pause: e('paused'),
    expire: [e('failed', ['finish'], { hasCleanup: false }), e('waiting', ['schedule-now'], { hasCleanup: true })],
  },
  running: {
    reclaim: e('running', ['acquire-lease']),
    park: e('waiting', ['release-lease']),
    release: e('pending', ['release-lease', 'schedule-now']),
    suspend: e('paused', ['release-lease', 'clear-pause-request'], { pauseRequested: true }),
    complete: e('succeeded', ['release-lease', 'clear-pause-request', 'finish']),
    fail: e('failed', ['release-lease', 'clear-pause-request', 'finish']),
    cancel: e('cancelling', ['abort-run']),
    // The scanner writes the error and fences the stalled run off; the worker that reclaims the task
    // fails it at its start, after replaying, so its cleanup runs (failed-outside.ts).
    expire: e('running', ['fence']),
    pause: e('running', ['request-pause'], { pauseRequested: false }),
    resume: e('running', ['clear-pause-request'], { pauseRequested: true }),
  },
  paused: {
    resume: e('pending', ['schedule-now']),
    cancel: cancelUnheld,
    expire: [e('failed', ['finish'], { hasCleanup: false }), e('pending', ['schedule-now'], { hasCleanup: true })],
  },
  cancelling: {
    reclaim: e('cancelling', ['acquire-lease']),
    // The run ended without cleaning up after a cancel that reached the task as it ended: it hands
    // the task over, lease expired, to a run that does (see `run/writer.ts`).
    release: e('cancelling', ['expire-lease']),
    fail: e('failed', ['release-lease', 'clear-pause-request', 'finish']),
    abort: e('cancelled', ['release-lease', 'clear-pause-request', 'finish']),
  },
  // A finished task runs again on `retry`: a failed one from its failed step, a succeeded or
  // cancelled one from a step the user names (`retry(id, { fromStep })`, checked by the command).
  succeeded: {
    retry: e('pending', ['schedule-now']),
  },
  failed: {
    retry: e('pending', ['schedule-now']),
  },
  cancelled: {
    retry: e('pending', ['schedule-now']),
  },
};

/** The part of a task the lifecycle looks at. */
export interface LifecycleState {
  readonly status: TaskStatus;
  readonly pauseRequested?: boolean;
  readonly hasCleanup?: boolean;
}

export interface Transition {
  readonly from: TaskStatus;
  readonly to: TaskStatus;
  readonly event: LifecycleEvent;
  readonly effects: readonly LifecycleEffect[];
  /** The edge exists only with (true) or without (false) a pause request: the store must re-check it. */
  readonly pauseRequested?: boolean;
}

function edgesOf(cell: Edge | readonly Edge[] | undefined): readonly Edge[] {
  return cell === undefined ? [] : Array.isArray(cell) ? cell : [cell as Edge];
}

function meets(state: LifecycleState, when: Condition | undefined): boolean {
  if (!when) return true;
  if (when.pauseRequested !== undefined && when.pauseRequested !== Boolean(state.pauseRequested)) return false;
  if (when.hasCleanup !== undefined && when.hasCleanup !== Boolean(state.hasCleanup)) return false;
  return true;
}

// A task's cleanup flag changes only with a status write (the end of a run), which bumps its
// version: a command guarded by the version it read needs no re-check of it. A pause request
// changes without one, so the store re-checks it (`Transition.pauseRequested`).
function edge(state: LifecycleState, event: LifecycleEvent): Edge | undefined {
  return edgesOf(TABLE[state.status][event]).find((candidate) => meets(state, candidate.when));
}

/**
 * The next status for `event`, and the effects to apply; throws {@link IllegalTransitionError}
 * (naming the status, the event and the legal events) when the table has no such edge.
 */
export function transition(state: LifecycleState, event: LifecycleEvent, taskId?: string): Transition {
  const found = edge(state, event);
  if (!found) throw new IllegalTransitionError(describeState(state), event, userEvents(state), taskId);
  const t: Transition = { from: state.status, to: found.to, event, effects: found.effects };
  return found.when?.pauseRequested === undefined ? t : { ...t, pauseRequested: found.when.pauseRequested };
}

/** The events legal from `state`, in table order. */
export function legalEvents(state: LifecycleState): LifecycleEvent[] {
  return ALL_EVENTS.filter((ev) => edge(state, ev) !== undefined);
}

/** The events a person may send from `state` (cancel, pause, resume, retry): what errors and `explain` list. */
export function userEvents(state: LifecycleState): LifecycleEvent[] {
  return legalEvents(state).filter((ev) => USER_EVENTS.includes(ev));
}

/** The statuses from which `event` is legal (for the store's atomic `WHERE status IN (…)`). */
export function sourcesOf(event: LifecycleEvent): TaskStatus[] {
  return ALL_STATUSES.filter((s) => TABLE[s][event] !== undefined);
}

export function isFinished(status: TaskStatus): boolean {
  return FINISHED_STATUSES.includes(status);
}

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && (ALL_STATUSES as readonly string[]).includes(value);
}

function describeState(state: LifecycleState): string {
  return state.status === 'running' && state.pauseRequested ? 'running (pause requested)' : state.status;
}

/**
 * The lifecycle as a Mermaid state diagram (`stateDiagram-v2`): one line per edge of the table,
 * labelled with its event (and its condition on a pause request), from creation (`[*] --> pending`)
 * to the finished statuses. With `current`, that status is highlighted (for a task's page).
 */
export function lifecycleDiagram(current?: TaskStatus): string {
  const lines = ['stateDiagram-v2', '  [*] --> pending: create'];
  for (const e of lifecycleEdges()) lines.push(`  ${e.from} --> ${e.to}: ${e.event}${e.condition ? ` (${e.condition})` : ''}`);
  for (const s of FINISHED_STATUSES) lines.push(`  ${s} --> [*]`);
  if (current) lines.push('  classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px', `  class ${current} current`);
  return lines.join('\n');
}

/** Every (status, event) edge, for drawing the lifecycle diagram. */
export function lifecycleEdges(): Array<{ from: TaskStatus; event: LifecycleEvent; to: TaskStatus; condition?: string }> {
  const out: Array<{ from: TaskStatus; event: LifecycleEvent; to: TaskStatus; condition?: string }> = [];
  for (const from of ALL_STATUSES) {
    for (const event of ALL_EVENTS) {
      for (const found of edgesOf(TABLE[from][event])) {
        const condition = describeCondition(found.when);
        out.push(condition ? { from, event, to: found.to, condition } : { from, event, to: found.to });
      }
    }
  }
  return out;
}

function describeCondition(when: Condition | undefined): string | undefined {
  if (!when) return undefined;
  const parts: string[] = [];
  if (when.pauseRequested !== undefined) parts.push(when.pauseRequested ? 'pause requested' : 'no pause request');
  if (when.hasCleanup !== undefined) parts.push(when.hasCleanup ? 'cleanup to run' : 'no cleanup');
  return parts.join(', ') || undefined;
}
