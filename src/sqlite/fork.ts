/**
 * @module sqlite/fork
 * Internal: not part of the public API.
 * A fork on SQLite: the new task and the copies of the source's journal rows, in one transaction.
 */
import type { NewTask, TaskRow } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';
import { insertOne } from './insert.ts';
import { inList } from './sql.ts';

/** The journal's columns but the task's and those a copy resets, read once per connection. */
const copied = new WeakMap<SqliteContext, string[]>();

function copiedColumns(c: SqliteContext): string[] {
  let cols = copied.get(c);
  if (!cols) {
    const all = (c.db.prepare('PRAGMA table_info(stepwise_steps)').all() as Raw[]).map((r) => String(r.name));
    copied.set(c, (cols = all.filter((n) => !['task_no', 'log_seq', 'epoch'].includes(n))));
  }
  return cols;
}

export function forkTask(c: SqliteContext, task: NewTask & { forkedFrom: string }, seqs: readonly number[]): TaskRow {
  return c.tx(() => {
    const from = c.noNow(task.forkedFrom);
    if (from === undefined) throw new Error(`forkTask: task ${task.forkedFrom} does not exist`);
    const inserted = insertOne(c, task);
    if (!inserted.created) return inserted.task;
    if (seqs.length) {
      const to = c.noNow(task.id) as number;
      const cols = copiedColumns(c);
      c.stmt(
        `INSERT INTO stepwise_steps (task_no, epoch, log_seq, ${cols.join(', ')})
         SELECT ?, 0, NULL, ${cols.join(', ')} FROM stepwise_steps WHERE task_no = ? AND seq IN (${inList(seqs.length)})`,
      ).run(to, from, ...seqs);
    }
    return inserted.task;
  });
}
