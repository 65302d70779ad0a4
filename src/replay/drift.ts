/**
 * @module replay/drift
 * `engine.drift(id | filter)`: the recorded model calls (`stepwise-engine/ai`) whose fingerprint
 * the current code would no longer produce (a prompt, model, tools or settings changed), found by
 * replaying each task (replay-task.ts: a scratch copy, no model call, no side effect); and
 * `'first-drift'`, the step a re-run or a fork starts from to record new answers.
 */
import { ConflictError, ERROR_CODES, InvalidArgumentError, isReplayCheckError, isStepwiseError } from '../errors.ts';
import { checkOptionKeys, LIST_OPTIONS } from '../option-keys.ts';
import type { CommandContext } from '../commands/context.ts';
import type { ListOptions } from '../commands/options.ts';
import { listTasks } from '../commands/queries.ts';
import { replayTask, type DriftedCall } from './replay-task.ts';

/** `fromStep: 'first-drift'` (retry, fork, bulk retry): the step of the task's first drifted model call. */
export const FIRST_DRIFT = 'first-drift';

/** One task's drift. */
export interface TaskDrift {
  taskId: string;
  workflow: string;
  /** The first drifted call's step id: what to re-run from (`fromStep: 'first-drift'`); null if none drifted. */
  firstDrift: string | null;
  /** The drifted calls, in journal order. */
  drift: DriftedCall[];
}

/** The tasks of a filter to check, newest first: `engine.list`'s filters; `limit` tasks at most (1–1000, 100 by default). */
export type DriftFilter = ListOptions;

export interface DriftReport {
  /** Tasks with at least one drifted call, newest first. */
  drifted: Array<TaskDrift & { firstDrift: string }>;
  /** Tasks looked at (drifted, not drifted, or not replayable). */
  checked: number;
  /** Tasks the current code does not replay (a step added or removed, another end) or whose workflow this engine does not have, with the reason. */
  unreplayable: Array<{ taskId: string; workflow: string; reason: string }>;
  /** Pass as `cursor` to check the next tasks of the filter; null when none are left. */
  nextCursor: string | null;
}

/** Real time one task's replay may take. */
const REPLAY_TIMEOUT_MS = 10_000;

/** The drift of task `id`; a task whose code does not replay is a ReplayCheckError (REPLAY_CHECK_FAILED) saying why. */
export async function taskDrift(ctx: CommandContext, id: string, caller = 'engine.drift'): Promise<TaskDrift> {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError(`${caller}(): a task id or a filter is required.`);
  const report = await replayTask(ctx, id, { timeoutMs: REPLAY_TIMEOUT_MS, caller });
  return { taskId: id, workflow: report.workflow, firstDrift: report.drift[0]?.step ?? null, drift: report.drift };
}

/** The drift of the tasks a filter matches, `limit` of them at most, newest first. */
export async function filterDrift(ctx: CommandContext, filter: DriftFilter): Promise<DriftReport> {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) throw new InvalidArgumentError('engine.drift(): pass a task id or a filter ({ workflow, tags, status, … }).');
  checkOptionKeys(filter, LIST_OPTIONS, 'engine.drift()');
  const { limit = 100, ...search } = filter;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`engine.drift(): limit must be a whole number from 1 to 1000, got ${String(limit)}.`);
  const report: DriftReport = { drifted: [], checked: 0, unreplayable: [], nextCursor: null };
  let cursor = search.cursor;
  do {
    const page = await listTasks(ctx, { ...search, limit: Math.min(100, limit - report.checked), ...(cursor !== undefined ? { cursor } : {}) });
    for (const t of page.tasks) {
      report.checked++;
      if (!ctx.workflows.has(t.workflow)) {
        report.unreplayable.push({ taskId: t.id, workflow: t.workflow, reason: `workflow "${t.workflow}" is not registered with this engine: its code cannot be replayed here.` });
        continue;
      }
      try {
        const d = await taskDrift(ctx, t.id);
        if (d.firstDrift !== null) report.drifted.push({ ...d, firstDrift: d.firstDrift });
      } catch (e) {
        // A task deleted since the page was read (retention, a user) is no longer there to report on.
        if (isStepwiseError(e, ERROR_CODES.TASK_NOT_FOUND)) continue;
        if (!isReplayCheckError(e)) throw e;
        report.unreplayable.push({ taskId: t.id, workflow: t.workflow, reason: e.message });
      }
    }
    cursor = page.nextCursor ?? undefined;
    report.nextCursor = page.nextCursor;
  } while (cursor !== undefined && report.checked < limit);
  return report;
}

/**
 * `fromStep` as given, or for `'first-drift'` the step of the task's first drifted model call (the
 * word is reserved: a step itself named `first-drift` cannot be named as `fromStep`). A task with
 * none is a ConflictError: there is nothing to re-run.
 */
export async function resolveFromStep(ctx: CommandContext, id: string, fromStep: string | undefined, caller: string): Promise<string | undefined> {
  if (fromStep !== FIRST_DRIFT) return fromStep;
  const { firstDrift } = await taskDrift(ctx, id, caller);
  if (firstDrift === null) {
    throw new ConflictError(
      `${caller}: task ${id} has no drifted model call (the current code makes every recorded model call with the request it was recorded with), so there is no first drift to start from. Name a step instead (fromStep: '<step>').`,
    );
  }
  return firstDrift;
}
