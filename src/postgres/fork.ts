/**
 * @module postgres/fork
 * Internal: not part of the public API.
 * A fork on PostgreSQL: the new task (the insert statement of `insert.ts`, with its NOTIFY) and the
 * copies of the source's journal rows, in one transaction.
 */
import type { NewTask, TaskRow } from '../store.ts';
import { toTaskRow } from '../rows.ts';
import { rows, run, tx, type PgContext } from './connection.ts';
import { insertSql, insertValues } from './insert.ts';

/** The journal's columns but the task's and those a copy resets, read once per store. */
const copied = new WeakMap<PgContext, Promise<string[]>>();

function copiedColumns(c: PgContext, read: () => Promise<string[]>): Promise<string[]> {
  let cols = copied.get(c);
  if (!cols) copied.set(c, (cols = read().then((all) => all.filter((n) => !['task_id', 'log_seq', 'epoch'].includes(n)))));
  return cols;
}

export async function forkTask(c: PgContext, task: NewTask & { forkedFrom: string }, seqs: readonly number[]): Promise<TaskRow> {
  const [schema, table] = c.t.steps.split('.') as [string, string];
  return run(c, () =>
    tx(c, async (client) => {
      const cols = await copiedColumns(c, async () =>
        (
          await rows(c, client, 'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position', [
            schema.replace(/"/g, ''),
            table.replace(/"/g, ''),
          ])
        ).map((r) => String(r.column_name)),
      );
      const [row] = await rows(c, client, insertSql(c, Boolean(task.tags && Object.keys(task.tags).length)), insertValues(c, [task], task.notify));
      if (!row) throw new Error(`forkTask: task ${task.id} was not inserted`);
      if (seqs.length) {
        await rows(
          c,
          client,
          `INSERT INTO ${c.t.steps} (task_id, epoch, log_seq, ${cols.join(', ')})
           SELECT $1, 0, NULL, ${cols.join(', ')} FROM ${c.t.steps} WHERE task_id = $2 AND seq = ANY($3::integer[])`,
          [task.id, task.forkedFrom, seqs],
        );
      }
      return toTaskRow(row);
    }),
  );
}
