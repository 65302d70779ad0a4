/**
 * @module commands/options
 * The options and answers of the engine's commands (start, signal, retry, list, count, result,
 * explain), shared by the command modules and re-exported by the engine.
 */
import type { Duration } from '../duration.ts';
import type { LifecycleEvent, TaskStatus } from '../lifecycle.ts';
import type { Actor } from '../task-events.ts';
import type { TaskSummary } from '../task-info.ts';
import type { Budget } from '../ai/metering/usage.ts';
import type { DebounceOptions, SingletonOptions } from '../api/start-keys.ts';
import type { Tags } from '../api/tags.ts';

export interface SignalOptions extends CommandOptions {
  /** Sending the same signal again with the same key records it once and returns the first answer. */
  idempotencyKey?: string;
  /**
   * Refuse the signal (CONFLICT, naming what the task waits for) unless the task is parked waiting
   * for an event of this name, or running (its code may be waiting for it right now). Catches a
   * typo such as "aprove" instead of queueing a signal nothing will ever receive.
   */
  requireWaiting?: boolean;
}

export interface SignalResult {
  /** `false` when the key was used before: nothing new was recorded. */
  created: boolean;
  /**
   * `waiting`: the task was parked waiting for it, and is now due; `queued`: kept until a wait for
   * its name receives it (a running task's code may be waiting for it now); `consumed`: (a repeat)
   * the first send was already received.
   */
  delivered: 'waiting' | 'queued' | 'consumed';
  /**
   * The task's status when the signal was sent (read in the same call): a sender that keeps
   * talking to a task (a chat session) learns without another read that it ended (`failed`: the
   * signal is kept for a retry).
   */
  status: TaskStatus;
}

/** Who asks: a name (taken as a user) or an {@link Actor}. Recorded in the task's event log. */
export type By = string | Actor;

/** Options of commands on a task. */
export interface CommandOptions {
  /** Who asks (recorded in the log). @defaultValue an anonymous user */
  by?: By;
}

/** Options of `engine.pause()` and `engine.resume()`. */
export interface MoveOptions extends CommandOptions {
  /** Also pause (or resume) every live task below this one: its child tasks, theirs, … @defaultValue false */
  subtree?: boolean;
}

export interface StartOptions extends CommandOptions {
  /** Starting twice with the same key returns the first task instead of creating a second. */
  idempotencyKey?: string;
  /** Do not run before this much time has passed. */
  delay?: Duration;
  /** This task's spending limit over its model calls, instead of the workflow's `budget`. */
  budget?: Budget;
  /**
   * When the task must be finished (a Date or ms since the epoch): a run past it fails the task
   * with DEADLINE_EXCEEDED, firing the running step's signal. With a workflow `timeout` too, the
   * earlier of the two applies.
   */
  deadline?: Date | number;
  /**
   * A short text naming the task for people (1-200 characters), shown in task lists (CLI, HTTP
   * API, dashboard); overrides the workflow's `title(input)`.
   */
  title?: string;
  /**
   * Collapse this start with the other starts of the workflow and key made within `period`: one
   * task, which runs with the last input once `period` has passed without a further start. A later
   * start answers with the same task (`created: false`) until a worker has claimed it; then it
   * starts a new one. Not with `idempotencyKey`, `delay` or `singleton`.
   */
  debounce?: DebounceOptions;
  /**
   * At most one live task of the workflow per key: a key (string), or `{ key, mode }`. While one has
   * not ended, a start is refused with SingletonRunningError (`mode: 'refuse'`, the default) or
   * answered with that task (`mode: 'join'`, `created: false`).
   */
  singleton?: string | SingletonOptions;
  /**
   * 0..1000, higher first: among due tasks a worker claims the one with the earliest
   * `runAt - priority × 1 s` (ageing: a task of priority p goes as if it had waited p seconds
   * longer, so lower priorities are never starved). Over the workflow's `priority`.
   * @defaultValue the workflow's `priority`, else 0
   */
  priority?: number;
  /**
   * Tags to find the task by (`list({ tags })`): at most 32 pairs, keys a letter then letters,
   * digits, `_ . : -` (≤ 64), values 1-256 characters. Children started by the task inherit them.
   */
  tags?: Tags;
  /**
   * Pin the task to this version of the workflow instead of the current one: only workers running
   * that version (or listing it in `compatibleVersions`) take it — a canary of a new version, or
   * more work for an old one during a migration. Refused unless this engine's definition runs it
   * or a worker has registered it. @defaultValue the version of the engine's definition, else the
   * last one a worker registered
   */
  version?: string;
}

export interface RetryTaskOptions extends CommandOptions {
  /** Run again from this step (a step id: `name`, or `name#2` for its second call), forgetting it and every later call. */
  fromStep?: string;
  /** A new deadline for the retried task (a Date or ms since the epoch). */
  deadline?: Date | number;
  /**
   * Before a succeeded task runs again from `fromStep`, run the compensations of the completed
   * steps it forgets (newest first), as a cleanup does; they then run again under new idempotency
   * keys. A failed or cancelled task had its compensations run by its cleanup when it ended.
   * @defaultValue false: the forgotten steps' effects are not undone
   */
  compensate?: boolean;
}

export interface ForkOptions extends CommandOptions {
  /**
   * The step the fork runs from (a step id: `name`, or `name#2` for its second call): the calls
   * before it are copied with their recorded results; it and everything after run anew. Absent:
   * nothing is copied (the fork runs from the start).
   */
  fromStep?: string;
  /** The fork's input. @defaultValue the source task's input */
  input?: unknown;
  /** Tags of the fork, over the source's (which it inherits). */
  tags?: Tags;
  /** The fork's title. @defaultValue the source task's title */
  title?: string;
}

export interface StartResult {
  id: string;
  workflow: string;
  status: TaskStatus;
  /** `false` when the idempotency key matched an existing task, which is returned instead. */
  created: boolean;
}

export interface ListOptions {
  status?: TaskStatus | readonly TaskStatus[];
  workflow?: string;
  /** Only tasks with all of these tags. */
  tags?: Tags;
  /** Only tasks created at or after this time (a Date or ms since the epoch). */
  createdAfter?: Date | number;
  /** Only tasks created before this time (a Date or ms since the epoch). */
  createdBefore?: Date | number;
  /**
   * Only failed tasks whose error has this code, or whose failed step's error had it (the cause of
   * STEP_FAILED): `'DEADLINE_EXCEEDED'`, `'RATE_LIMITED'`, a `code` of your own errors.
   */
  failedWith?: string;
  /**
   * Only tasks whose id, workflow, title, tags, input or error contain this text (case-insensitive
   * for ASCII letters). A scan: narrow it with the other filters on large stores.
   */
  text?: string;
  /** Only the children of this task (`ctx.startChild`). */
  parent?: string;
  /** Page size, 1–1000. @defaultValue 50 */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface CountOptions {
  /** Only these statuses. @defaultValue every status */
  status?: TaskStatus | readonly TaskStatus[];
  /** Only tasks of these workflows. */
  workflow?: string | readonly string[];
  /** Only tasks due now (their `runAt` has come): pending or waiting tasks a worker may claim. */
  due?: boolean;
  /**
   * Count each status up to this many only: the work stays bounded however many tasks there are
   * (metrics scraped every few seconds use it). @defaultValue no cap: exact counts
   */
  cap?: number;
}

export interface ListResult {
  tasks: TaskSummary[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  nextCursor: string | null;
}

export interface ResultOptions {
  /** Reject with TimeoutError if the task has not finished by then. */
  timeout?: Duration;
  signal?: AbortSignal;
}

export interface Explanation {
  id: string;
  status: TaskStatus;
  /** One sentence on why the task is (not) moving. */
  summary: string;
  /** What a person may do now (cancel, pause, resume, retry). */
  legalEvents: LifecycleEvent[];
  lease: { owner: string; expiresAt: number; expired: boolean } | null;
  wait: Record<string, unknown> | null;
  runAt: number | null;
  lastStep: { name: string; status: string; attempts: number; error: string | null } | null;
  error: string | null;
  /** A state machine's task: the state it is in and the events it takes now (`engine.send`). */
  machine?: { state: string; legalEvents: string[] };
}
