/**
 * @module commands/bulk
 * `engine.bulk({ action, filter })`: one command applied to every task a filter of `engine.list`
 * matches: cancel, retry, pause, resume or delete. The tasks are read a page at a time (newest
 * first; the cursor is an id, so tasks the action moves out of the filter are neither skipped nor
 * met twice) and acted on a few at a time through the engine's own commands, so each action is
 * checked against the task's status and recorded in its log with the actor, as a single command
 * is. A dry run only counts what the action would take. A task the action does not apply to (a
 * cancel of a finished task) is skipped, and one whose command fails is reported with its error;
 * neither stops the rest. A retry from `'first-drift'` replays each task first (also in a dry run,
 * so the count is right): a task with no drifted model call is skipped, one its code does not
 * replay is reported failed, and the rest are re-run from their own first drifted step.
 */
import { BULK_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { InvalidArgumentError, coerceError } from '../errors.ts';
import { legalEvents, type LifecycleEvent } from '../lifecycle.ts';
import type { TaskSummary } from '../task-info.ts';
import { FIRST_DRIFT } from '../replay/drift.ts';
import type { CommandOptions, ListOptions, ListResult } from './options.ts';

export const BULK_ACTIONS = ['cancel', 'retry', 'pause', 'resume', 'delete'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export interface BulkOptions extends CommandOptions {
  action: BulkAction;
  /** The tasks: a filter of `engine.list` (no `limit` or `cursor`). */
  filter: Omit<ListOptions, 'limit' | 'cursor'>;
  /** Count what the action would take, change nothing. @defaultValue false */
  dryRun?: boolean;
  /** At most this many tasks are acted on (or counted); the answer says if more matched. @defaultValue 10,000 */
  limit?: number;
  /** `cancel`: the reason recorded on each task. */
  reason?: string;
  /** `retry`: the step each task runs again from (required for succeeded and cancelled tasks); `'first-drift'`: each task's first drifted model call. */
  fromStep?: string;
  /** `retry` with `fromStep`: undo each succeeded task's steps from there on first (`engine.retry`'s `compensate`); other statuses are skipped. */
  compensate?: boolean;
}

export interface BulkResult {
  action: BulkAction;
  dryRun: boolean;
  /** Tasks the filter matched (up to `limit`). */
  matched: number;
  /** Tasks acted on (a dry run: that the action would take). */
  acted: number;
  /** Tasks the action does not apply to in their status (or, from `'first-drift'`, with no drifted call: `reason` says so), the first 100. */
  skipped: Array<{ id: string; status: string; reason?: string }>;
  skippedCount: number;
  /** Tasks whose command failed, with its error, the first 100. */
  failed: Array<{ id: string; code: string; message: string }>;
  failedCount: number;
  /** More tasks matched than `limit`: run it again for the rest. */
  truncated: boolean;
}

/** What bulk uses of the engine: its listing and its commands. */
export interface BulkHost {
  list(options: ListOptions): Promise<ListResult>;
  cancel(id: string, options: CommandOptions & { reason?: string }): Promise<unknown>;
  retry(id: string, options: CommandOptions & { fromStep?: string; compensate?: boolean }): Promise<unknown>;
  pause(id: string, options: CommandOptions): Promise<unknown>;
  resume(id: string, options: CommandOptions): Promise<unknown>;
  delete(id: string, options: CommandOptions): Promise<unknown>;
  drift(id: string): Promise<{ firstDrift: string | null }>;
}

const PAGE = 200;
/** Commands in flight at once: enough to hide round trips, few enough to leave the store to others. */
const CONCURRENCY = 8;
const KEPT = 100;

/** Whether `action` applies to a task as listed (the command checks again when it runs). */
function applies(action: BulkAction, t: TaskSummary, fromStep: string | undefined): boolean {
  if (action === 'delete') return t.status === 'succeeded' || t.status === 'failed' || t.status === 'cancelled';
  if (action === 'retry' && t.status !== 'failed' && fromStep === undefined) return false;
  return legalEvents({ status: t.status, pauseRequested: t.pauseRequested }).includes(action as LifecycleEvent);
}

function checkBulk(options: BulkOptions): void {
  checkOptionKeys(options, BULK_OPTIONS, 'engine.bulk()');
  if (!BULK_ACTIONS.includes(options.action)) throw new InvalidArgumentError(`engine.bulk(): action must be one of ${BULK_ACTIONS.join(', ')}, got ${JSON.stringify(options.action)}.`);
  if (typeof options.filter !== 'object' || options.filter === null) throw new InvalidArgumentError('engine.bulk(): filter is required (a filter of engine.list; {} for every task).');
  if ('limit' in options.filter || 'cursor' in options.filter) throw new InvalidArgumentError('engine.bulk(): the filter takes no limit or cursor (give bulk its own limit).');
  const limit = options.limit ?? 10_000;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError(`engine.bulk(): limit must be a whole number ≥ 1, got ${String(options.limit)}.`);
  if (options.reason !== undefined && options.action !== 'cancel') throw new InvalidArgumentError('engine.bulk(): reason goes with action "cancel".');
  if (options.fromStep !== undefined && options.action !== 'retry') throw new InvalidArgumentError('engine.bulk(): fromStep goes with action "retry".');
  if (options.compensate !== undefined && typeof options.compensate !== 'boolean')
    throw new InvalidArgumentError(`engine.bulk(): compensate must be true or false, got ${JSON.stringify(options.compensate)}.`);
  if (options.compensate && (options.action !== 'retry' || options.fromStep === undefined))
    throw new InvalidArgumentError('engine.bulk(): compensate goes with action "retry" and a fromStep.');
}

export async function bulk(host: BulkHost, options: BulkOptions): Promise<BulkResult> {
  checkBulk(options);
  const { action, dryRun = false, fromStep } = options;
  const compensate = options.compensate === true;
  const limit = options.limit ?? 10_000;
  const by = options.by !== undefined ? { by: options.by } : {};
  const result: BulkResult = { action, dryRun, matched: 0, acted: 0, skipped: [], skippedCount: 0, failed: [], failedCount: 0, truncated: false };
  const act = (t: TaskSummary & { step?: string }): Promise<unknown> => {
    if (action === 'cancel') return host.cancel(t.id, { ...by, ...(options.reason !== undefined ? { reason: options.reason } : {}) });
    if (action === 'retry') return host.retry(t.id, { ...by, ...(fromStep !== undefined ? { fromStep: t.step ?? fromStep } : {}), ...(compensate ? { compensate } : {}) });
    return host[action](t.id, by);
  };
  let cursor: string | undefined;
  do {
    const page = await host.list({ ...options.filter, limit: Math.min(PAGE, limit - result.matched + 1), ...(cursor ? { cursor } : {}) });
    let tasks = page.tasks;
    if (result.matched + tasks.length > limit) {
      tasks = tasks.slice(0, limit - result.matched);
      result.truncated = true;
    }
    result.matched += tasks.length;
    let todo: Array<TaskSummary & { step?: string }> = [];
    for (const t of tasks) {
      if (compensate && t.status !== 'succeeded') skip(result, t, 'compensate re-runs succeeded tasks only (a cleanup undid the others when they ended)');
      else if (applies(action, t, fromStep)) todo.push(t);
      else skip(result, t);
    }
    if (action === 'retry' && fromStep === FIRST_DRIFT) todo = await firstDrifts(host, todo, result);
    if (dryRun) result.acted += todo.length;
    else await inBatches(todo, act, result);
    cursor = result.truncated ? undefined : (page.nextCursor ?? undefined);
  } while (cursor);
  return result;
}

/** Counts `t` as skipped, keeping the first {@link KEPT} (with `reason` when it is not the task's status). */
function skip(result: BulkResult, t: TaskSummary, reason?: string): void {
  if (result.skippedCount++ < KEPT) result.skipped.push({ id: t.id, status: t.status, ...(reason !== undefined ? { reason } : {}) });
}

/** The tasks with a drifted model call, each with the step it re-runs from; those without are skipped, those whose replay fails are failed. */
async function firstDrifts(host: BulkHost, tasks: readonly TaskSummary[], result: BulkResult): Promise<Array<TaskSummary & { step: string }>> {
  const stepOf = new Map<string, string>();
  await inBatches(
    tasks,
    async (t) => {
      const { firstDrift } = await host.drift(t.id);
      if (firstDrift !== null) stepOf.set(t.id, firstDrift);
      else skip(result, t, 'no drifted model call');
    },
    result,
    false,
  );
  // In list order (newest first), as the rest of the command goes.
  return tasks.flatMap((t) => {
    const step = stepOf.get(t.id);
    return step === undefined ? [] : [{ ...t, step }];
  });
}

/** Runs `fn` on each task, {@link CONCURRENCY} at a time, counting the failed and (`acts`) the acted. */
async function inBatches<T extends TaskSummary>(tasks: readonly T[], fn: (t: T) => Promise<unknown>, result: BulkResult, acts = true): Promise<void> {
  for (let i = 0; i < tasks.length; i += CONCURRENCY) {
    await Promise.all(
      tasks.slice(i, i + CONCURRENCY).map(async (t) => {
        try {
          await fn(t);
          if (acts) result.acted++;
        } catch (e) {
          const error = coerceError(e) as Error & { code?: unknown };
          if (result.failedCount++ < KEPT) result.failed.push({ id: t.id, code: typeof error.code === 'string' ? error.code : 'INTERNAL', message: error.message });
        }
      }),
    );
  }
}
