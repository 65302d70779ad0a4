/**
 * @module postgres/run-events
 * Internal: not part of the public API.
 * Log entries a run appends beside its journal (model usage of an attempt), with the task's usage
 * column, in one statement fenced by the run's epoch (see {@link appendFence}: the row lock
 * numbers the entries without gaps, as for a checkpoint).
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import { Params, appendFence } from './sql-text.ts';
import { appendSql } from './transition.ts';
import type { RunEventsWrite } from '../store.ts';

export async function appendRunEvents(c: PgContext, w: RunEventsWrite): Promise<boolean> {
  return run(c, async () => {
    const p = new Params();
    const id = p.add(w.taskId, 'text');
    const epoch = p.add(w.epoch, 'integer');
    const n = w.events.length;
    const usage = p.add(w.usage, 'text');
    const at = p.add(w.at, 'bigint');
    const sql = `WITH f AS (${appendFence(c.t, id, epoch, String(n)).replace('SET event_seq', `SET usage = ${usage}, event_seq`)}
      ), log AS (${appendSql(c.t, p, 'f', id, `f.event_seq - ${n}`, at, w.events)}
      )
      SELECT 1 FROM f`;
    return (await rows(c, poolOf(c), sql, p.values)).length === 1;
  });
}
