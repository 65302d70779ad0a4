/**
 * @module ai/metering/subtree-budget
 * Internal: not part of the public API.
 * Budgets that cover a task's subtree (`budget.scope: 'subtree'`). A child records, when it is
 * started, the subtree limits of the tasks above it (`UsageSummary.above`, in its usage column, so
 * that any worker running it knows them, whether or not it has the ancestors' workflows). Before a
 * model call, a task checks each of them, and its own budget when that is a subtree budget, against
 * what the whole subtree of that task has spent, read from the tree's rows. The check reads what
 * was recorded: calls made at the same moment by several tasks of one tree can together pass a
 * limit by at most what each of them was let through for.
 */
import type { Store, TaskRow } from '../../store.ts';
import { emptySummary, emptyTotals, parseSummary, type Budget, type SubtreeLimit, type UsageTotals } from './usage.ts';

/** The most tasks of a tree read to add up a subtree's spending. */
const TREE_READ = 10_000;

/**
 * The usage column a child of `parent` starts with: the subtree limits of the tasks above the parent
 * and the parent's own when its budget (`budget`, the one in force) covers its subtree; null when
 * there are none.
 */
export function childStartUsage(parent: Pick<TaskRow, 'id' | 'usage'>, budget: Budget | undefined): string | null {
  const above: SubtreeLimit[] = [...(parseSummary(parent.usage).above ?? [])];
  if (budget?.scope === 'subtree') {
    above.push({ taskId: parent.id, ...(budget.tokens !== undefined ? { tokens: budget.tokens } : {}), ...(budget.usd !== undefined ? { usd: budget.usd } : {}) });
  }
  return above.length ? JSON.stringify({ ...emptySummary(), above }) : null;
}

/**
 * What the subtree of `taskId` has spent: its own calls and those of every task below it, from one
 * read of the tree (`rootId`'s). `self` is the caller's task with the totals it knows (newer than
 * its row while a write is on its way).
 */
export async function subtreeSpent(store: Store, rootId: string, taskId: string, self: { id: string; total: UsageTotals }): Promise<UsageTotals> {
  const tree = await store.listTasks({ root: rootId, limit: TREE_READ });
  const totalOf = (t: Pick<TaskRow, 'id' | 'usage'>): UsageTotals => (t.id === self.id ? self.total : parseSummary(t.usage).total);
  const head = taskId === self.id ? self : { total: totalOf({ id: taskId, usage: (await store.getTask(taskId))?.usage ?? null }) };
  const sum = totalsBelow(tree, taskId, totalOf);
  addTotals(sum, head.total);
  return sum;
}

/** The usage of every task of `tree` below `taskId` (its children, theirs, …), added up. */
export function totalsBelow(tree: readonly TaskRow[], taskId: string, totalOf: (t: TaskRow) => UsageTotals = (t) => parseSummary(t.usage).total): UsageTotals {
  const byParent = new Map<string, TaskRow[]>();
  for (const t of tree) if (t.parentId) byParent.set(t.parentId, [...(byParent.get(t.parentId) ?? []), t]);
  const sum = emptyTotals();
  const queue = [...(byParent.get(taskId) ?? [])];
  while (queue.length) {
    const t = queue.pop() as TaskRow;
    addTotals(sum, totalOf(t));
    queue.push(...(byParent.get(t.id) ?? []));
  }
  return sum;
}

function addTotals(into: UsageTotals, t: UsageTotals): void {
  for (const k of Object.keys(into) as Array<keyof UsageTotals>) into[k] += t[k];
}
