/**
 * @module sqlite/insert
 * Internal: not part of the public API.
 * New tasks on SQLite: a row per task (a taken idempotency key returns the task that holds it)
 * and its first log entry, a batch in one transaction (one commit, one sync).
 */
import { toTaskRow } from '../rows.ts';
import type { NewTask, TaskRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { byKey } from './read.ts';
import { HELD_AT_START_SQL, heldAtStartParams } from './key-queues.ts';

/** One task, inside the caller's write transaction (`debounce.ts` and `singleton.ts` use it too). */
export function insertOne(c: SqliteContext, task: NewTask): { task: TaskRow; created: boolean } {
  const row = c
    .stmt(
      `INSERT INTO stepwise_tasks (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at, usage, deadline_at, title, debounce_key, singleton_key,
       concurrency_key, concurrency_limit, priority, parent_id, root_id, depth, tags, forked_from, held_by_key)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HELD_AT_START_SQL})
     ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
    )
    .get(
      task.id,
      task.workflow,
      task.workflowVersion,
      task.status,
      task.input,
      task.idempotencyKey,
      task.runAt,
      task.createdAt,
      task.createdAt,
      task.usage ?? null,
      task.deadlineAt ?? null,
      task.title ?? null,
      task.debounceKey ?? null,
      task.singletonKey ?? null,
      task.concurrencyKey ?? null,
      task.concurrencyLimit ?? null,
      task.priority ?? 0,
      task.parentId ?? null,
      task.rootId ?? null,
      task.depth ?? 0,
      tagsText(task.tags),
      task.forkedFrom ?? null,
      ...heldAtStartParams(task),
    ) as Raw | undefined;
  if (row) {
    if (task.tags) writeTagRows(c, task.id, task.tags);
    // A new row's log is empty (a deleted task's key may be handed out again, but its log went with it).
    c.checkSeqs();
    c.knowSeq(Number(row.no), 0);
    c.append(Number(row.no), task.createdAt, [task.log]);
    return { task: toTaskRow(row), created: true };
  }
  return { task: byKey(c, task.idempotencyKey as string) as TaskRow, created: false };
}

const tagsText = (tags: NewTask['tags']): string | null => (tags && Object.keys(tags).length ? JSON.stringify(tags) : null);

/** A task's rows in the tag index (in the caller's write transaction). */
export function writeTagRows(c: SqliteContext, taskId: string, tags: Readonly<Record<string, string>>): void {
  const stmt = c.stmt('INSERT OR IGNORE INTO stepwise_task_tags (key, value, task_id) VALUES (?, ?, ?)');
  for (const [key, value] of Object.entries(tags)) stmt.run(key, value, taskId);
}

export function insertTask(c: SqliteContext, task: NewTask): { task: TaskRow; created: boolean } {
  return c.tx(() => insertOne(c, task));
}

export function insertTasks(c: SqliteContext, tasks: readonly NewTask[]): Array<{ task: TaskRow; created: boolean }> {
  // One transaction, one commit (one sync) for the whole batch; a key taken by an earlier task of
  // the batch is found by the same lookup as one taken before it.
  return tasks.length ? c.tx(() => tasks.map((task) => insertOne(c, task))) : [];
}
