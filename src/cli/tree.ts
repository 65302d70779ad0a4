/**
 * @module cli/tree
 * `stepwise show`'s tree of a task: its parent, and its children and theirs (child tasks), each
 * with its workflow and status, read through the public API (`engine.get`).
 */
import type { Engine, RelatedTaskInfo, TaskInfo } from '../index.ts';
import { bold, colorStatus, dim } from './style.ts';

/** The most descendants read and drawn. */
const MOST = 200;

/** Each task of the tree below `t` (read breadth first, at most {@link MOST}) with its children. */
export async function readTree(engine: Engine, t: TaskInfo): Promise<Map<string, RelatedTaskInfo[]>> {
  const kids = new Map<string, RelatedTaskInfo[]>([[t.id, t.children]]);
  const queue = [...t.children];
  let read = t.children.length;
  while (queue.length && read < MOST) {
    const next = queue.shift() as RelatedTaskInfo;
    const info = await engine.get(next.id, { steps: false, history: false });
    kids.set(next.id, info.children);
    queue.push(...info.children);
    read += info.children.length;
  }
  return kids;
}

/** The lines of the tree: the parent (if any), this task, and its descendants indented below it. */
export function treeLines(t: TaskInfo, kids: ReadonlyMap<string, readonly RelatedTaskInfo[]>): string[] {
  if (!t.parent && !t.children.length) return [];
  const out = ['', bold('Tree')];
  if (t.parent) out.push(`  ${dim('parent')} ${t.parent.id}  ${t.parent.workflow}  ${colorStatus(t.parent.status)}`);
  out.push(`  ${bold(t.id)}  ${t.workflow}  ${colorStatus(t.status)}`);
  let drawn = 0;
  const draw = (id: string, indent: string): void => {
    const list = kids.get(id) ?? [];
    list.forEach((c, i) => {
      if (drawn++ >= MOST) return;
      const last = i === list.length - 1;
      out.push(`  ${indent}${last ? '└─' : '├─'} ${c.id}  ${c.workflow}  ${colorStatus(c.status)}`);
      draw(c.id, `${indent}${last ? '   ' : '│  '}`);
    });
  };
  draw(t.id, '');
  if (drawn > MOST) out.push(dim(`  … more: stepwise ls --parent <id>`));
  return out;
}
