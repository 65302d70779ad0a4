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
import type { Alert } from './alerts/types.ts';
import type { TaskStatus } from './lifecycle.ts';
import type { TaskEvent } from './task-events.ts';
import type { AttemptInfo, NewsBus, NewsOf, NewsType, RunInfo } from './news.ts';
import type { ApprovalNotice } from './approvals/types.ts';
import type { IdempotencyEvent, TasksDeletedEvent } from './task-events/observed.ts';
import type { DwellAlert } from './task-events/dwell.ts';

export type { AttemptInfo, RunInfo } from './news.ts';

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
  /**
   * A task stayed past a `dwell` bound whose outcome is `alert` (found by this process's worker),
   * once per stay; the task's log has the same `dwell:exceeded` entry.
   */
  onDwellAlert?(alert: DwellAlert): unknown;
  /**
   * An alert a worker of this process raised (`new Engine({ alerts })`): a workflow failing again
   * and again, a task in a crash loop, a workflow no live worker serves, a task stuck past its dwell
   * bound; once per subject and quiet period across every worker of the store.
   */
  onAlert?(alert: Alert): unknown;
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

/** How one type of news feeds the observers' hook that hears it. */
type Feed = { [K in NewsType]: { type: K; hook: ObserverHook; feed: (observers: readonly Observer[], news: NewsOf<K>) => void } }[NewsType];

function attemptOf(news: NewsOf<'step:started' | 'step:completed' | 'step:retrying' | 'step:failed'>): AttemptInfo {
  const { step, attempt, idempotencyKey } = news.payload;
  return { ...news.run, step, attempt, idempotencyKey };
}

/** The observers' view of the news: each hook and the news it is fed from. */
const FEEDS: readonly Feed[] = [
  { type: 'run:claimed', hook: 'onRunStart', feed: (os, n) => notify(os, 'onRunStart', { ...n.run }) },
  { type: 'run:finished', hook: 'onRunEnd', feed: (os, n) => notify(os, 'onRunEnd', { ...n.run, status: n.payload.status, durationMs: n.payload.durationMs }) },
  { type: 'step:started', hook: 'onStepStart', feed: (os, n) => notify(os, 'onStepStart', attemptOf(n)) },
  { type: 'step:completed', hook: 'onStepEnd', feed: (os, n) => notify(os, 'onStepEnd', { ...attemptOf(n), durationMs: n.payload.durationMs }) },
  { type: 'step:retrying', hook: 'onStepError', feed: (os, n) => notify(os, 'onStepError', { ...attemptOf(n), error: n.payload.error, retrying: true, delayMs: n.payload.delayMs }) },
  { type: 'step:failed', hook: 'onStepError', feed: (os, n) => notify(os, 'onStepError', { ...attemptOf(n), error: n.payload.error, retrying: false, delayMs: null }) },
  { type: 'worker:error', hook: 'onWorkerError', feed: (os, n) => notify(os, 'onWorkerError', { workerId: n.workerId, error: n.payload.error, during: n.payload.during }) },
  { type: 'approval:notice', hook: 'onApproval', feed: (os, n) => notify(os, 'onApproval', n.payload) },
  { type: 'dwell:alert', hook: 'onDwellAlert', feed: (os, n) => notify(os, 'onDwellAlert', n.alert) },
  { type: 'alert:raised', hook: 'onAlert', feed: (os, n) => notify(os, 'onAlert', n.payload) },
];

/**
 * Feeds `observers` from the news of `bus` (the engine's, so the news of all its workers). Only
 * the news some observer has a hook for is listened to: a run builds news only when someone
 * listens. Returns the function that disconnects them.
 */
export function observeNews(bus: NewsBus, observers: readonly Observer[]): () => void {
  const offs = FEEDS.filter((f) => observers.some((o) => typeof o[f.hook] === 'function')).map((f) =>
    bus.on(f.type, (news) => (f.feed as (os: readonly Observer[], n: typeof news) => void)(observers, news)),
  );
  return () => {
    for (const off of offs) off();
  };
}
