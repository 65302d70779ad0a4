/**
 * @module commands/queries
 * The reading commands: `engine.get` (a task with its journal, log and approvals), `engine.list`
 * (a page of tasks, newest first) and `engine.count` (tasks by status).
 */
import { COUNT_OPTIONS, GET_OPTIONS, LIST_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import { ALL_STATUSES, isTaskStatus, type TaskStatus } from '../lifecycle.ts';
import type { EventRow, ListQuery, Store, TaskRow } from '../store.ts';
import { EVENT_TYPES } from '../log-entries.ts';
import { TAGS_MAX, checkTags } from '../api/tags.ts';
import { checkText } from '../text-rules.ts';
import { toStepInfo, toSummary, type TaskInfo } from '../task-info.ts';
import { toTaskEvent } from '../task-events.ts';
import { machineInfo } from '../machine/read.ts';
import { toApprovalInfo } from '../approvals/info.ts';
import { taskRow, type CommandContext } from './context.ts';
import type { CountOptions, ListOptions, ListResult } from './options.ts';
import { childrenOf, parentOf, usageBelow } from './children.ts';
import { emptyTotals, stepTotals, type AttemptUsage, type UsageTotals } from '../ai/metering/usage.ts';

/** Refuses a status that is not one of the lifecycle's. */
function checkStatuses(statuses: readonly unknown[]): void {
  for (const s of statuses) {
    if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown status "${String(s)}": use one of ${ALL_STATUSES.join(', ')}.`);
  }
}

export async function getTask(ctx: CommandContext, id: string, options: { steps?: boolean; history?: boolean }): Promise<TaskInfo> {
  checkOptionKeys(options, GET_OPTIONS, 'engine.get()');
  const store = await ctx.open();
  const row = await taskRow(store, id);
  // A poller that needs only the status and progress skips the journal and the log (`steps: false`).
  const [steps, history, approvals] = await Promise.all([
    options.steps === false ? [] : store.getSteps(id),
    options.history === false ? [] : store.getEvents(id),
    options.steps === false ? [] : store.listApprovals({ taskId: id, limit: 1000 }),
  ]);
  const machine = machineInfo(row, steps);
  const [parent, children] = await Promise.all([parentOf(store, row), childrenOf(store, id)]);
  const below = await usageBelow(store, row, children.length > 0);
  const summary = toSummary(row);
  const usage = summary.usage ? { ...summary.usage, steps: await stepUsage(store, id, row.usage !== null && options.history !== false ? history : null) } : null;
  return {
    ...summary,
    ...(usage ? { usage } : {}),
    ...(below ? { usage: { ...(usage ?? { total: emptyTotals(), steps: {} }), children: below } } : {}),
    parent,
    children,
    steps: steps.map((s) => toStepInfo(s, row.redo)),
    history: history.map(toTaskEvent),
    approvals: approvals.map(toApprovalInfo),
    ...(machine ? { machine } : {}),
  };
}

/** Per-step usage totals, from the task's `usage:attempt` log entries (`history` when already read). */
async function stepUsage(store: Store, id: string, history: readonly EventRow[] | null): Promise<Record<string, UsageTotals>> {
  const entries = history ?? (await store.getEventsOfType(id, [EVENT_TYPES.usageAttempt]));
  return stepTotals(entries.filter((e) => e.type === EVENT_TYPES.usageAttempt && e.data).map((e) => JSON.parse(e.data!) as AttemptUsage));
}

function checkParent(parent: unknown): string {
  if (typeof parent !== 'string' || !parent) throw new InvalidArgumentError('list({ parent }): the id of the parent task, a non-empty string.');
  return parent;
}

/** The search filters of a listing (tags, creation time, error code, text), checked. */
function searchTerms(options: ListOptions): Partial<ListQuery> {
  const q: { -readonly [K in keyof ListQuery]?: ListQuery[K] } = {};
  if (options.tags !== undefined) {
    const tags = Object.entries(checkTags(options.tags, 'list({ tags })'));
    // A null value has no index rows; it would silently match every task.
    if (tags.some(([, v]) => v === null)) throw new InvalidArgumentError('list({ tags }): each tag needs a value to match.');
    if (tags.length) q.tags = tags as Array<[string, string]>;
  }
  if (options.createdAfter !== undefined) q.createdAfter = timeOption(options.createdAfter, 'createdAfter');
  if (options.createdBefore !== undefined) q.createdBefore = timeOption(options.createdBefore, 'createdBefore');
  if (options.failedWith !== undefined) {
    if (typeof options.failedWith !== 'string' || !options.failedWith) throw new InvalidArgumentError('list({ failedWith }): an error code, a non-empty string such as "RATE_LIMITED".');
    q.failedWith = options.failedWith;
  }
  if (options.text !== undefined) {
    if (typeof options.text !== 'string' || !options.text || options.text.length > 200) throw new InvalidArgumentError('list({ text }): a non-empty string of at most 200 characters.');
    q.text = checkText(options.text, 'list({ text })');
  }
  return q;
}

function timeOption(value: unknown, name: string): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new InvalidArgumentError(`list({ ${name} }): a Date or ms since the epoch, got ${String(value)}.`);
  return ms;
}

export async function listTasks(ctx: CommandContext, options: ListOptions): Promise<ListResult> {
  checkOptionKeys(options, LIST_OPTIONS, 'engine.list()');
  const store = await ctx.open();
  const statuses = options.status === undefined ? undefined : Array.isArray(options.status) ? options.status : [options.status];
  checkStatuses(statuses ?? []);
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`limit must be an integer from 1 to 1000, got ${limit}.`);
  const rows = await store.listTasks({
    limit,
    ...(statuses ? { statuses } : {}),
    ...(options.workflow !== undefined ? { workflow: options.workflow } : {}),
    ...(options.parent !== undefined ? { parent: checkParent(options.parent) } : {}),
    ...(options.cursor !== undefined ? { before: options.cursor } : {}),
    ...searchTerms(options),
  });
  return { tasks: rows.map(toSummary), nextCursor: rows.length === limit ? (rows[rows.length - 1] as TaskRow).id : null };
}

/**
 * `engine.setTags(id, tags)`: merges `tags` into the task's (a null value removes one), whatever
 * its status; the task's tags after the change.
 */
export async function setTaskTags(ctx: CommandContext, id: string, tags: Readonly<Record<string, string | null>>): Promise<Record<string, string>> {
  const checked = Object.entries(checkTags(tags, 'engine.setTags()', true));
  const store = await ctx.open();
  await taskRow(store, id);
  const set = Object.fromEntries(checked.filter(([, v]) => v !== null)) as Record<string, string>;
  const remove = checked.filter(([, v]) => v === null).map(([k]) => k);
  const after = await store.setTags(id, { set, remove, max: TAGS_MAX });
  if (after === null) throw new TaskNotFoundError(id);
  if (after === 'too-many') throw new InvalidArgumentError(`engine.setTags(): a task has at most ${TAGS_MAX} tags; remove some (a null value removes a tag) before adding others.`);
  return after;
}

export async function countTasks(ctx: CommandContext, options: CountOptions): Promise<Record<TaskStatus, number>> {
  checkOptionKeys(options, COUNT_OPTIONS, 'engine.count()');
  const store = await ctx.open();
  const statuses: readonly TaskStatus[] =
    options.status === undefined ? ALL_STATUSES : Array.isArray(options.status) ? (options.status as readonly TaskStatus[]) : [options.status as TaskStatus];
  checkStatuses(statuses);
  const workflows: readonly string[] | undefined =
    options.workflow === undefined ? undefined : Array.isArray(options.workflow) ? (options.workflow as readonly string[]) : [options.workflow as string];
  if (workflows?.some((w) => typeof w !== 'string' || !w)) throw new InvalidArgumentError('count({ workflow }): a workflow name, or a list of them.');
  const cap = options.cap;
  if (cap !== undefined && (!Number.isSafeInteger(cap) || cap < 1)) throw new InvalidArgumentError(`count({ cap }) must be a whole number ≥ 1, got ${String(cap)}.`);
  const counts = await store.countTasks({ statuses, ...(workflows ? { workflows } : {}), ...(options.due ? { dueBy: ctx.clock.now() } : {}) }, cap);
  return Object.fromEntries(statuses.map((s) => [s, counts[s] ?? 0])) as Record<TaskStatus, number>;
}
