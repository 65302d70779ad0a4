/**
 * @module commands/children
 * Child tasks at the engine's level: the start of a task whose parent is a running task
 * (`ctx.startChild`, see `primitives/child.ts`), and the reads of a task's parent and children
 * for `engine.get()`. The child's identity is its idempotency key, derived by the caller from the
 * parent's call: a start repeated after a crash finds the child the first one created.
 */
import { ChildDepthExceededError } from '../errors.ts';
import type { Store, TaskRow } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import { planStart, startResult, type StartAnswer } from '../start-plan.ts';
import { startContext, type StartDeps } from './start.ts';

/** What `engine.get()` shows of a task's parent or of one of its children. */
export interface RelatedTask {
  id: string;
  workflow: string;
  status: TaskRow['status'];
}

/**
 * Starts (or finds, by `key`) a child of `parent`: one depth below it, in its tree. Refused with
 * CHILD_DEPTH_EXCEEDED past `limits.childDepth`; an unknown workflow or a bad input is refused as
 * by `engine.start()`.
 */
export async function startChildTask(
  deps: StartDeps,
  parent: Pick<TaskRow, 'id' | 'rootId' | 'depth'>,
  workflow: string | Workflow<unknown, unknown, unknown>,
  input: unknown,
  key: string,
): Promise<StartAnswer> {
  const depth = parent.depth + 1;
  const limit = deps.ctx.limits.childDepth;
  if (depth > limit) throw new ChildDepthExceededError(parent.id, typeof workflow === 'string' ? workflow : String(workflow?.name), depth, limit);
  const store = await deps.ctx.open();
  const planned = await planStart(startContext(deps.ctx, store), workflow, input, { idempotencyKey: key, by: { kind: 'system', id: `task:${parent.id}` } });
  planned.task.parentId = parent.id;
  planned.task.rootId = parent.rootId ?? parent.id;
  planned.task.depth = depth;
  return startResult(planned, await deps.batcher(store).insert(planned.task));
}

/** The children of `id`, oldest first (up to `limit`). */
export async function childrenOf(store: Store, id: string, limit = 1000): Promise<RelatedTask[]> {
  const rows = await store.listTasks({ parent: id, limit });
  return rows.reverse().map(related);
}

/** The parent of `row`, or null (also when the parent was deleted). */
export async function parentOf(store: Store, row: TaskRow): Promise<RelatedTask | null> {
  if (!row.parentId) return null;
  const parent = await store.getTask(row.parentId);
  return parent ? related(parent) : null;
}

function related(t: TaskRow): RelatedTask {
  return { id: t.id, workflow: t.workflow, status: t.status };
}
