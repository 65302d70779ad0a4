/**
 * @module news
 * Internal: not part of the public API (the package exports only its index modules).
 * The one type of in-process news and the one bus per engine that carries it. News is what
 * happens in this process that other parts of it react to: a task became runnable, was
 * cancelled, paused, resumed or settled, entries of its log were committed (the engine's and its
 * workers' news to each other and to `result()` and `events()` readers), and what a worker did
 * (claimed a run, ran a step, met an error…) or its dwell scanner found. Each news is one member
 * of {@link News}, told apart by `type`, with typed fields (statuses are `TaskStatus`).
 *
 * Everything that watches work reads this one stream: `worker.on(name, fn)` hands the payload of
 * that worker's news of that type (events.ts lists the payloads), and observers' hooks are fed
 * from it (observers.ts `observeNews`), with the run the news came from. Across processes the
 * task news travels through the store (PostgreSQL LISTEN/NOTIFY) or is found by polling and
 * heartbeats.
 */
import type { WorkerEventName, WorkerEvents } from './events.ts';
import type { TaskStatus } from './lifecycle.ts';
import type { TaskOutcome } from './store.ts';
import type { DwellAlert } from './task-events/dwell.ts';

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

/** News about a task, between an engine and its workers and readers. */
export type TaskNews =
  | { type: 'task:ready'; taskId: string; workflow: string | null }
  | { type: 'task:cancel'; taskId: string; reason: string | null }
  | { type: 'task:pause'; taskId: string }
  | { type: 'task:resume'; taskId: string }
  /**
   * A run ended or a task changed where a waiter may want to look again. `status`: the task's
   * status when known (`lease-lost`: a run that ended without writing); `row`: the task's outcome
   * (or whole row) as the write that finished it committed it (given only by that write's
   * process, only for a finished task).
   */
  | { type: 'task:settled'; taskId: string; status?: TaskStatus | 'lease-lost'; row?: TaskOutcome }
  /** Entries of the task's event log were committed by this process. */
  | { type: 'log:appended'; taskId: string }
  /** Stream frames of the task were committed by this process (readers of its frames look again). */
  | { type: 'stream:appended'; taskId: string }
  /** Entries or stream frames of a followed task were committed by another process (`log-watch.ts`). */
  | { type: 'log:moved'; taskId: string };

/** The worker news that always come from a run of a task. */
export type RunNewsType = 'run:claimed' | 'run:finished' | 'step:started' | 'step:completed' | 'step:retrying' | 'step:failed' | 'lease:lost' | 'approval:notice' | 'budget:spent';

/**
 * News of a worker: the worker, the run it came from (for news of a run; a worker's error may
 * come from a run or from the worker itself), and the payload `worker.on(type)` hands over.
 */
export type WorkerNews = {
  [K in WorkerEventName]: { type: K; workerId: string; run: K extends RunNewsType ? RunInfo : RunInfo | null; payload: WorkerEvents[K] };
}[WorkerEventName];

/** A task stayed past a `dwell` bound whose outcome is `alert` (found by a worker's scanner). */
export interface DwellAlertNews {
  type: 'dwell:alert';
  alert: DwellAlert;
}

export type News = TaskNews | WorkerNews | DwellAlertNews;
export type NewsType = News['type'];
export type NewsOf<K extends NewsType> = Extract<News, { type: K }>;

interface Subscription {
  listener: (news: News) => void;
}

/**
 * The in-process news of one engine and its workers. Every `result()` and `events()` reader of the
 * process waits here (each removes its listener when it is done), so the number of listeners is
 * the number of waiting callers, not a leak: there is no limit.
 */
export class NewsBus {
  readonly #byType = new Map<NewsType, Subscription[]>();

  /** Calls `listener` with each news of `type` from now on; returns the function that stops it. */
  on<K extends NewsType>(type: K, listener: (news: NewsOf<K>) => void): () => void {
    const sub: Subscription = { listener: listener as (news: News) => void };
    this.#byType.set(type, [...(this.#byType.get(type) ?? []), sub]);
    return () => {
      const left = (this.#byType.get(type) ?? []).filter((s) => s !== sub);
      if (left.length) this.#byType.set(type, left);
      else this.#byType.delete(type);
    };
  }

  /** Whether anyone listens (so that a hot path builds no news nobody reads). */
  hears(type: NewsType): boolean {
    return this.#byType.has(type);
  }

  /**
   * Hands `news` to each listener of its type, in the order they subscribed. A listener that
   * throws does not reach the publisher (the engine's own work must not fail because of a
   * listener) and is reported as a process warning.
   */
  publish(news: News): void {
    const subs = this.#byType.get(news.type);
    if (!subs) return;
    for (const sub of subs) {
      try {
        sub.listener(news);
      } catch (e) {
        process.emitWarning(`A "${news.type}" listener threw: ${e instanceof Error ? e.message : String(e)}`, { code: 'STEPWISE_LISTENER' });
      }
    }
  }
}
