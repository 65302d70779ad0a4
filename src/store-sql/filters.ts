/**
 * @module store-sql/filters
 * Internal: not part of the public API.
 * The WHERE clauses both stores build from a query of the Store contract, written once over
 * {@link SqlParams}: task listings, the selection of a deletion or count, and approval queries.
 * Statuses are SQL literals (checked against the lifecycle's list), not parameters: with
 * literals, SQLite proves that a query implies a partial index's WHERE clause and PostgreSQL plans
 * each status by its own statistics.
 */
import { InvalidArgumentError } from '../errors.ts';
import { isTaskStatus, type TaskStatus } from '../lifecycle.ts';
import type { ApprovalQuery, ListQuery, TaskSelection } from '../store.ts';
import type { SqlParams } from './params.ts';
import { firstIdAt } from '../ids.ts';

/** Statuses as a list of SQL literals (`'pending', 'running'`); an unknown status is refused. */
export function statusLiterals(statuses: readonly TaskStatus[]): string {
  return statuses
    .map((s) => {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown task status "${String(s)}"`);
      return `'${s}'`;
    })
    .join(', ');
}

/** `WHERE a AND b …`, or nothing for no terms. */
export const whereOf = (terms: readonly string[]): string => (terms.length ? `WHERE ${terms.join(' AND ')}` : '');

/**
 * The terms of a task listing ({@link ListQuery}: statuses, workflow, family, ids before a cursor,
 * creation time, error code, text). `id` names the column ids are bounded on: the tag index's
 * `task_id` when a tag drives the scan, so that the bounds narrow that index's range.
 */
export function taskListTerms(q: ListQuery, p: SqlParams, id = 'id'): string[] {
  const where: string[] = [];
  if (q.statuses?.length) where.push(`status IN (${statusLiterals(q.statuses)})`);
  if (q.workflow !== undefined) where.push(`workflow = ${p.add(q.workflow, 'text')}`);
  if (q.parent !== undefined) where.push(`parent_id = ${p.add(q.parent, 'text')}`);
  if (q.root !== undefined) where.push(`root_id = ${p.add(q.root, 'text')}`);
  if (q.before !== undefined) where.push(`${id} < ${p.add(q.before, 'text')}`);
  // An id's time is its task's creation time or up to a second after it (ids.ts): the id bounds
  // let the scan of the primary key start and stop near the range; created_at decides exactly.
  if (q.createdAfter !== undefined) where.push(`${id} >= ${p.add(firstIdAt(q.createdAfter), 'text')}`, `created_at >= ${p.add(q.createdAfter, 'bigint')}`);
  if (q.createdBefore !== undefined) where.push(`${id} < ${p.add(firstIdAt(q.createdBefore + 1000), 'text')}`, `created_at < ${p.add(q.createdBefore, 'bigint')}`);
  if (q.failedWith !== undefined) {
    // The task's error, or the error a failed step's error wraps (STEP_FAILED's cause).
    // (Each placeholder binds one value: SQLite's `?` cannot be used twice.)
    const code = `${p.jsonText('error', ['code'])} = ${p.add(q.failedWith, 'text')}`;
    const causeCode = `${p.jsonText('error', ['cause', 'code'])} = ${p.add(q.failedWith, 'text')}`;
    where.push(`status = 'failed'`, `(${code} OR ${causeCode})`);
  }
  if (q.text !== undefined) {
    const pattern = `%${q.text.toLowerCase().replace(/[\\%_]/g, '\\$&')}%`;
    const columns = ['id', 'workflow', 'title', 'tags', 'input', 'error'].map((col) => `lower(${col}) LIKE ${p.add(pattern, 'text')} ESCAPE '\\'`);
    where.push(`(${columns.join(' OR ')})`);
  }
  return where;
}

/**
 * A task listing's statement, newest first. With tags, the first tag's index rows drive the scan
 * (a backward range of (key, value, task_id), so the page is read in id order and stops at
 * `limit`); the other tags are tests on the index. `tasks` and `tags` are the tables' names.
 */
export function taskListSql(q: ListQuery, p: SqlParams, tables: { tasks: string; tags: string }): string {
  const [first, ...rest] = q.tags ?? [];
  if (!first) return `SELECT * FROM ${tables.tasks} ${whereOf(taskListTerms(q, p))} ORDER BY id DESC LIMIT ${p.add(q.limit, 'integer')}`;
  const join = `JOIN ${tables.tasks} t ON t.id = g.task_id`;
  const terms = [`g.key = ${p.add(first[0], 'text')}`, `g.value = ${p.add(first[1], 'text')}`, ...taskListTerms(q, p, 'g.task_id')];
  for (const [key, value] of rest) {
    terms.push(`EXISTS (SELECT 1 FROM ${tables.tags} h WHERE h.task_id = g.task_id AND h.key = ${p.add(key, 'text')} AND h.value = ${p.add(value, 'text')})`);
  }
  return `SELECT t.* FROM ${tables.tags} g ${join} ${whereOf(terms)} ORDER BY g.key DESC, g.value DESC, g.task_id DESC LIMIT ${p.add(q.limit, 'integer')}`;
}

/** Whether a selection can match no task (no status, or an empty list of ids or workflows): then nothing is read. */
export const selectsNothing = (d: TaskSelection): boolean => !d.statuses.length || d.ids?.length === 0 || d.workflows?.length === 0;

/** The WHERE condition (without `WHERE`) of a deletion or count on the tasks table. */
export function selectionCondition(d: TaskSelection, p: SqlParams): string {
  const where = [`status IN (${statusLiterals(d.statuses)})`];
  if (d.ids) where.push(p.anyOf('id', d.ids, 'text'));
  if (d.idBefore !== undefined) where.push(`id < ${p.add(d.idBefore, 'text')}`);
  if (d.idAfter !== undefined) where.push(`id >= ${p.add(d.idAfter, 'text')}`);
  if (d.finishedBefore !== undefined) where.push(`finished_at < ${p.add(d.finishedBefore, 'bigint')}`);
  if (d.workflows) where.push(p.anyOf('workflow', d.workflows, 'text'));
  if (d.dueBy !== undefined) where.push(`run_at <= ${p.add(d.dueBy, 'bigint')}`);
  if (d.notVersions?.length) where.push(`NOT (${p.anyOf('workflow_version', d.notVersions, 'text')})`);
  return where.join(' AND ');
}

/**
 * The term a bulk deletion (retention, purge: no `ids`) adds: a child task whose parent has not
 * ended is kept, so that a tree is deleted from its end, never a child before its parent's end.
 * `tasks` is the tasks table's name.
 */
export function keptWhileParentLive(d: TaskSelection, tasks: string): string {
  if (d.ids) return '';
  // A lookup of the parent by its primary key (the subquery's alias hides the table's own name, so
  // `${tasks}.parent_id` is the outer row's).
  return ` AND (parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM ${tasks} p WHERE p.id = ${tasks}.parent_id AND p.status IN (${statusLiterals(LIVE)})))`;
}

const LIVE: readonly TaskStatus[] = ['pending', 'running', 'waiting', 'paused', 'cancelling'];

/** The terms of an approval query ({@link ApprovalQuery}); `tasks` is the tasks table's name. */
export function approvalTerms(q: ApprovalQuery, p: SqlParams, tasks: string): string[] {
  const where: string[] = [];
  if (q.taskId !== undefined) where.push(`task_id = ${p.add(q.taskId, 'text')}`);
  if (q.statuses?.length) where.push(p.anyOf('status', q.statuses, 'text'));
  if (q.workflow !== undefined) where.push(`workflow = ${p.add(q.workflow, 'text')}`);
  if (q.approver !== undefined) {
    const listed = [q.approver, ...(q.approverRoles ?? []).map((r) => `role:${r}`)].map((a) => p.jsonHas('approvers', a));
    where.push(listed.length > 1 ? `(${listed.join(' OR ')})` : (listed[0] as string));
  }
  if (q.taskStatuses) where.push(`EXISTS (SELECT 1 FROM ${tasks} t WHERE t.id = task_id AND ${p.anyOf('t.status', q.taskStatuses, 'text')})`);
  if (q.openOnlyFor) where.push(`(status NOT IN ('pending', 'escalated') OR EXISTS (SELECT 1 FROM ${tasks} t WHERE t.id = task_id AND ${p.anyOf('t.status', q.openOnlyFor, 'text')}))`);
  return where;
}
