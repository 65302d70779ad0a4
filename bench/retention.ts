// `npm run bench`, (i) retention: deleting finished tasks with everything they own. Two databases
// are filled alike (the same number of three-step tasks run through the engine to the end: a task
// row, three journal rows, its log entries); the engine deletes one's with `engine.purge({
// olderThan: 0 })` (batches of 1,000, each in one transaction), the other is deleted by hand-written
// SQL of the same rows (one statement per table, by task, in one transaction). Both are timed from
// the call to its return; the ratio is engine ÷ raw.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import pg from 'pg';
import { Engine } from '../dist/index.js';
import { fmt, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { threeSteps } from './workflows.ts';

export interface RetentionFigure {
  store: string;
  tasks: number;
  engineTasksPerSec: number;
  rawTasksPerSec: number;
  ratio: number;
}

/** Runs `n` three-step tasks to the end through the engine at `url`. */
async function fill(url: string, n: number): Promise<void> {
  const engine = new Engine({ store: url, workflows: [threeSteps] });
  const worker = engine.worker({ concurrency: 256 });
  await worker.start();
  for (let done = 0; done < n; done += 1000) {
    const handles = await engine.startMany(Array.from({ length: Math.min(1000, n - done) }, () => ({ workflow: threeSteps.name, input: null })));
    await Promise.all(handles.map((h) => h.result()));
  }
  await engine.close();
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function purgeMs(url: string): Promise<number> {
  const engine = new Engine({ store: url, workflows: [threeSteps] });
  await engine.ready();
  const ms = await timed(() => engine.purge({ olderThan: 0 }));
  await engine.close();
  return ms;
}

async function sqlite(n: number): Promise<RetentionFigure> {
  const [a, b] = [join(tempDir(), 'purge-engine.db'), join(tempDir(), 'purge-raw.db')];
  await fill(`sqlite:${a}`, n);
  await fill(`sqlite:${b}`, n);
  const engineMs = await purgeMs(`sqlite:${a}`);
  const db = new Database(b);
  db.pragma('journal_mode = WAL');
  const rawMs = await timed(async () => {
    db.transaction(() => {
      const nos = "SELECT no FROM stepwise_tasks WHERE status = 'succeeded'";
      db.prepare(`DELETE FROM stepwise_events WHERE task_no IN (${nos})`).run();
      db.prepare(`DELETE FROM stepwise_steps WHERE task_no IN (${nos})`).run();
      db.prepare("DELETE FROM stepwise_tasks WHERE status = 'succeeded'").run();
    }).immediate();
  });
  db.close();
  return figure('sqlite', n, engineMs, rawMs);
}

async function postgresFigure(n: number): Promise<RetentionFigure> {
  const [a, b] = [postgres.freshPgUrl('purge_engine'), postgres.freshPgUrl('purge_raw')];
  await fill(a, n);
  await fill(b, n);
  const engineMs = await purgeMs(a);
  const schema = new URL(b).searchParams.get('schema') as string;
  const client = new pg.Client({ connectionString: postgres.PG_URL });
  await client.connect();
  const rawMs = await timed(async () => {
    await client.query('BEGIN');
    const ids = `SELECT id FROM "${schema}".tasks WHERE status = 'succeeded'`;
    await client.query(`DELETE FROM "${schema}".events WHERE task_id IN (${ids})`);
    await client.query(`DELETE FROM "${schema}".steps WHERE task_id IN (${ids})`);
    await client.query(`DELETE FROM "${schema}".tasks WHERE status = 'succeeded'`);
    await client.query('COMMIT');
  });
  await client.end();
  return figure('postgres', n, engineMs, rawMs);
}

function figure(store: string, tasks: number, engineMs: number, rawMs: number): RetentionFigure {
  return { store, tasks, engineTasksPerSec: (tasks * 1000) / engineMs, rawTasksPerSec: (tasks * 1000) / rawMs, ratio: engineMs / rawMs };
}

export async function report({ quick, pgUp, line, results }: SectionCtx): Promise<void> {
  const n = quick ? 2000 : 10_000;
  line(`\n(i) Retention: ${n.toLocaleString('en-US')} finished three-step tasks deleted with their journal and log, by engine.purge (batches`);
  line('    of 1,000, each one transaction) and by hand-written SQL of the same rows (one transaction), on databases filled alike.');
  const out: RetentionFigure[] = [await sqlite(n)];
  if (pgUp) out.push(await postgresFigure(n));
  for (const f of out) {
    line(`    ${f.store.padEnd(9)} engine.purge ${fmt(f.engineTasksPerSec, 0).padStart(7)} tasks/s | raw SQL ${fmt(f.rawTasksPerSec, 0).padStart(7)} tasks/s → ${fmt(f.ratio, 2)}×`);
  }
  results.retention = out;
}
