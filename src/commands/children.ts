/**
 * @module commands/children
 * Child tasks at the engine's level: the start of a task whose parent is a running task
 * (`ctx.startChild`, see `primitives/child.ts`), and the reads of a task's parent and children
 * for `engine.get()`. The child's identity is its idempotency key, derived by the caller from the
 * parent's call: a start repeated after a crash finds the child the first one created.
 */
import { ChildDepthExceededError, ERROR_CODES, InvalidArgumentError, isStepwiseError } from '../errors.ts';
import { isFinished } from '../lifecycle.ts';
import { moveTask } from './lifecycle.ts';
import type { CommandContext } from './context.ts';
import type { MoveOptions } from './options.ts';
import type { Store, TaskRow } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import { planStart, startResult, type StartAnswer } from '../start-plan.ts';
import { startContext, type StartDeps } from './start.ts';
import type { UsageTotals } from '../ai/metering/usage.ts';
import { totalsBelow } from '../ai/metering/subtree-budget.ts';

/** What `engine.get()` shows of a task's parent or of one of its children. */
export interface RelatedTask {
  id: string;
  workflow: string;
  status: TaskRow['status'];
}

/**
 * Starts (or finds, by `key`) a child of `parent`: one depth below it, in its tree. Refused with
 * CHILD_DEPTH_EXCEEDED past `limits.childDepth`; an unknown workflow or a bad input is refused as
 * by `engine.start()`. The child inherits the parent's tags.
 */
export async function startChildTask(
  deps: StartDeps,
  parent: Pick<TaskRow, 'id' | 'rootId' | 'depth'> & { tags?: string | null; childUsage?: string | null },
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
  // A child inherits its parent's tags (a tenant's tree is found by the tenant's tag).
  if (parent.tags) planned.task.tags = JSON.parse(parent.tags) as Record<string, string>;
  // The subtree budgets of the tasks above it, which its model calls are checked against.
  if (parent.childUsage) planned.task.usage = parent.childUsage;
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

/**
 * `engine.pause(id, { subtree: true })` / `resume`: the same move for every live task below `id`,
 * parents before their children. A task the move does not apply to (finished, already paused, not
 * paused) is passed over.
 */
export async function moveSubtree(ctx: CommandContext, id: string, event: 'pause' | 'resume', options: MoveOptions): Promise<void> {
  const store = await ctx.open();
  const queue = [id];
  while (queue.length) {
    const children = await store.listTasks({ parent: queue.shift() as string, limit: 1000 });
    for (const c of children.reverse()) {
      queue.push(c.id);
      if (isFinished(c.status)) continue;
      await moveTask(ctx, c.id, event, { ...(options.by !== undefined ? { by: options.by } : {}) }).catch((e: unknown) => {
        if (!isStepwiseError(e, ERROR_CODES.ILLEGAL_TRANSITION)) throw e;
      });
    }
  }
}

/** Checks `subtree` of a pause or resume. */
export function wantsSubtree(options: MoveOptions): boolean {
  if (options.subtree !== undefined && typeof options.subtree !== 'boolean') throw new InvalidArgumentError('pause/resume({ subtree }) must be true or false.');
  return options.subtree === true;
}

/** The most tasks of a tree read to add up the usage below a task. */
const TREE_READ = 10_000;

/**
 * The model usage of every task below `row` in its tree (its children, theirs, …), added up; null
 * when it has no children. Read in one query of the tree (by `root_id`), at most {@link TREE_READ} tasks.
 */
export async function usageBelow(store: Store, row: TaskRow, hasChildren: boolean): Promise<UsageTotals | null> {
  if (!hasChildren) return null;
  const tree = await store.listTasks({ root: row.rootId ?? row.id, limit: TREE_READ });
  return totalsBelow(tree, row.id);
}

function related(t: TaskRow): RelatedTask {
  return { id: t.id, workflow: t.workflow, status: t.status };
}
