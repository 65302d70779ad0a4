/**
 * @module observers
 * The one seam for everything that watches work: logs, metrics, traces, token accounting and live
 * dashboards are observers given to `new Engine({ observers })`. An observer has hooks around each
 * run of a task and each step attempt (start, end, error, with the attempt's context), and
 * `onEvent` for the log entries of the tasks this process writes to, in log order.
 *
 * Hooks are called synchronously where the work happens and must be quick; a hook that throws (or
 * returns a promise that rejects) never fails the engine's work: it is reported as a process
 * warning with code `STEPWISE_OBSERVER`. Nothing else may patch into a run.
 */
import type { TaskStatus } from './lifecycle.ts';
import type { TaskEvent } from './task-events.ts';
import type { WorkerEvents } from './events.ts';
import type { IdempotencyEvent } from './idempotency/run.ts';
import type { ApprovalNotice } from './approvals/types.ts';
import type { TasksDeletedEvent } from './retention/policy.ts';

/** One run of a task: a worker's claim of it until the run ends. */
export interface RunInfo {
  taskId: string;
  workflow: string;
  /** The lease epoch of this run (the fencing token its writes carry). */
  epoch: number;
  workerId: string;
  /** Taken over from a worker whose lease expired. */
  reclaimed: boolean;
}

/** One attempt of one step. */
export interface AttemptInfo extends RunInfo {
  /** Step id: name, `#n` from the second occurrence on. */
  step: string;
  /** 1 for the first attempt. */
  attempt: number;
  /**
   * The key this attempt received to pass to external APIs: `v1:<task>:<step>#<n>`, or
   * `v<keyVersion>:<key>` for a step with a business key; a step run again after its undo has the
   * suffix `:redo<n>`.
   */
  idempotencyKey: string;
}

export interface Observer {
  /** For warnings about this observer. */
  name?: string;
  onRunStart?(run: RunInfo): unknown;
  /**
   * `status` is the task's status when the run ended, or `lease-lost` if it ended without writing
   * because it lost its lease. A run whose worker stopped in the middle of its cleanup also writes
   * nothing: its status is then the task's, still `cancelling` (or `running`).
   */
  onRunEnd?(run: RunInfo & { status: TaskStatus | 'lease-lost'; durationMs: number }): unknown;
  onStepStart?(attempt: AttemptInfo): unknown;
  /** The attempt's result is durable (a step reported here never runs again). */
  onStepEnd?(attempt: AttemptInfo & { durationMs: number }): unknown;
  /** The attempt failed; `retrying` says whether another attempt follows (after `delayMs`). */
  onStepError?(attempt: AttemptInfo & { error: Error; retrying: boolean; delayMs: number | null }): unknown;
  /**
   * The log entries of every task this process writes to, once each, in `seq` order per task:
   * from the first entry this process appends to a task, its whole log as it grows (entries other
   * processes append to that task included). To count work across a fleet, count each entry's
   * `actor` rather than summing every process's `onEvent`.
   */
  onEvent?(event: TaskEvent): unknown;
  /**
   * An idempotency record was hit (a repeat got the stored result), refused a repeat with other
   * parameters (a conflict), or was taken over from an owner whose lease ran out: from
   * `engine.idempotency.run` and from steps with a business key, in this process.
   */
  onIdempotency?(event: IdempotencyEvent): unknown;
  /**
   * An approval was requested, reminded, escalated or decided (by a person through this process's
   * `engine.decide`, or by a timeout policy in this process's worker): everything a notifier needs
   * to send an e-mail or a chat message, with the CLI commands that decide it.
   */
  onApproval?(notice: ApprovalNotice): unknown;
  /**
   * Finished tasks were deleted, each with its journal and log (`engine.delete`, `engine.purge`, or
   * a worker's retention sweep), in this process: a deleted task leaves no log of its own, so this
   * is where an audit trail of deletions is kept.
   */
  onTasksDeleted?(event: TasksDeletedEvent): unknown;
  /** The worker itself met a problem (a claim or heartbeat failed); it keeps going. */
  onWorkerError?(e: { workerId: string; error: Error; during: string }): unknown;
}

export type ObserverHook = Exclude<keyof Observer, 'name'>;
type HookPayload<K extends ObserverHook> = Parameters<NonNullable<Observer[K]>>[0];

/** Calls `hook` of every observer that has it, so that none can fail the caller. */
export function notify<K extends ObserverHook>(observers: readonly Observer[], hook: K, payload: HookPayload<K>): void {
  for (const o of observers) {
    const fn = o[hook] as ((p: unknown) => unknown) | undefined;
    if (typeof fn !== 'function') continue;
    try {
      const r = fn.call(o, payload);
      if (r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(undefined, (e: unknown) => warn(o, hook, e));
    } catch (e) {
      warn(o, hook, e);
    }
  }
}

function warn(o: Observer, hook: string, e: unknown): void {
  process.emitWarning(`Observer ${o.name ?? '(unnamed)'} threw in ${hook}: ${e instanceof Error ? e.message : String(e)}`, { code: 'STEPWISE_OBSERVER' });
}

type On = <K extends keyof WorkerEvents & string>(name: K, listener: (payload: WorkerEvents[K]) => void) => () => void;

/**
 * Connects observers to a worker's events, adding each run's context to its step events.
 * Returns the function that disconnects them.
 */
export function observeWorker(on: On, workerId: string, observers: readonly Observer[]): () => void {
  const has = (hook: ObserverHook): boolean => observers.some((o) => typeof o[hook] === 'function');
  const runs = new Map<string, RunInfo>();
  const attempt = (e: { taskId: string; step: string; attempt: number; idempotencyKey: string }): AttemptInfo => {
    const run = runs.get(e.taskId) ?? { taskId: e.taskId, workflow: '', epoch: 0, workerId, reclaimed: false };
    return { ...run, step: e.step, attempt: e.attempt, idempotencyKey: e.idempotencyKey };
  };
  const offs = [
    on('run:claimed', (e) => {
      const run: RunInfo = { taskId: e.taskId, workflow: e.workflow, epoch: e.epoch, workerId, reclaimed: e.reclaimed };
      runs.set(e.taskId, run);
      notify(observers, 'onRunStart', run);
    }),
    on('run:finished', (e) => {
      const run = runs.get(e.taskId) ?? { taskId: e.taskId, workflow: e.workflow, epoch: 0, workerId, reclaimed: false };
      runs.delete(e.taskId);
      notify(observers, 'onRunEnd', { ...run, status: e.status as TaskStatus | 'lease-lost', durationMs: e.durationMs });
    }),
    on('worker:error', (e) => notify(observers, 'onWorkerError', { workerId, error: e.error, during: e.during })),
  ];
  if (has('onApproval')) offs.push(on('approval:notice', (e) => notify(observers, 'onApproval', e)));
  // Step events are built by the run only when someone listens: subscribe only for hooks in use.
  if (has('onStepStart')) offs.push(on('step:started', (e) => notify(observers, 'onStepStart', attempt(e))));
  if (has('onStepEnd')) offs.push(on('step:completed', (e) => notify(observers, 'onStepEnd', { ...attempt(e), durationMs: e.durationMs })));
  if (has('onStepError')) {
    offs.push(
      on('step:retrying', (e) => notify(observers, 'onStepError', { ...attempt(e), error: e.error, retrying: true, delayMs: e.delayMs })),
      on('step:failed', (e) => notify(observers, 'onStepError', { ...attempt(e), error: e.error, retrying: false, delayMs: null })),
    );
  }
  return () => {
    for (const off of offs) off();
  };
}
