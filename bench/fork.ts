// `npm run bench`, (f) fork: a task of 200 no-op steps (`noop`, `noop#2`, … `noop#200`) run to the
// end, then forked from its last step (`noop#200`: 199 journal rows copied). Timed per fork, from
// the call of `engine.fork()` to its answer (the fork created, not run), median and p99 of 20;
// the rows the fork wrote are counted in the tables (task rows, journal rows, log entries, tag
// rows). Beside it, from the call to the result: the fork run to its end (replaying 199 recorded
// steps, running one) against a new start of the same task (running all 200). And `engine.drift(id)`
// on the 200-step task: its replay against the current code in a scratch database (no step runs),
// from the call to the answer, median and p99.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import pg from 'pg';
import { Engine } from '../dist/index.js';
import { fmt, median, percentile, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { manySteps } from './workflows.ts';

const STEPS = 200;

interface ForkFigure {
  store: string;
  forkMs: { p50: number; p99: number };
  rows: Record<string, number>;
  forkToResultMs: number;
  freshToResultMs: number;
  driftMs: { p50: number; p99: number };
}

async function measure(url: string, label: string, count: (table: 'tasks' | 'steps' | 'events' | 'tags') => Promise<number>, samples: number): Promise<ForkFigure> {
  const engine = new Engine({ store: url, workflows: [manySteps] });
  const worker = engine.worker({ concurrency: 8 });
  await worker.start();
  try {
    const { id } = await engine.start(manySteps, { n: STEPS }, { tags: { tenant: 'bench' } });
    await engine.result(id, { timeout: '120s' });
    const before = { tasks: await count('tasks'), steps: await count('steps'), events: await count('events'), tags: await count('tags') };
    await worker.stop();
    // Forks made while no worker runs: the figure is the fork's own cost.
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      await engine.fork(id, { fromStep: `noop#${STEPS}` });
      times.push(performance.now() - t0);
    }
    const after = { tasks: await count('tasks'), steps: await count('steps'), events: await count('events'), tags: await count('tags') };
    const drifts: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      const d = await engine.drift(id);
      drifts.push(performance.now() - t0);
      if (d.firstDrift !== null) throw new Error(`bench (f): the task's own code drifted at ${d.firstDrift}`);
    }
    const perFork = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, (v - before[k as keyof typeof before]) / samples]));
    const runner = engine.worker({ concurrency: 8 });
    await runner.start();
    // Drain the forks made above, then time one fork and one fresh start, each to its result.
    for (const t of (await engine.list({ status: 'pending', limit: 1000 })).tasks) await engine.result(t.id, { timeout: '120s' });
    let t0 = performance.now();
    const fork = await engine.fork(id, { fromStep: `noop#${STEPS}` });
    await engine.result(fork.id, { timeout: '120s' });
    const forkToResultMs = performance.now() - t0;
    t0 = performance.now();
    const fresh = await engine.start(manySteps, { n: STEPS });
    await engine.result(fresh.id, { timeout: '120s' });
    const freshToResultMs = performance.now() - t0;
    await runner.stop();
    return {
      store: label,
      forkMs: { p50: median(times), p99: percentile(times, 99) },
      rows: perFork,
      forkToResultMs,
      freshToResultMs,
      driftMs: { p50: median(drifts), p99: percentile(drifts, 99) },
    };
  } finally {
    await engine.close();
  }
}

export async function report(ctx: SectionCtx): Promise<void> {
  const samples = ctx.quick ? 5 : 20;
  ctx.line(`\n(f) Fork: a ${STEPS}-step task forked from its last step (${STEPS - 1} journal rows copied); engine.fork() call to answer,`);
  ctx.line(`    p50 / p99 of ${samples}; rows written per fork; and to the result: the fork run (replays ${STEPS - 1}, runs 1) vs a new start (runs ${STEPS}).`);
  const figures: ForkFigure[] = [];
  const path = join(tempDir(), 'fork.db');
  const sqlite = (): Database.Database => new Database(path, { readonly: true });
  const sqliteTables = { tasks: 'stepwise_tasks', steps: 'stepwise_steps', events: 'stepwise_events', tags: 'stepwise_task_tags' };
  figures.push(
    await measure(
      `sqlite:${path}`,
      'SQLite',
      async (t) => {
        const db = sqlite();
        try {
          return Number((db.prepare(`SELECT count(*) AS n FROM ${sqliteTables[t]}`).get() as { n: number }).n);
        } finally {
          db.close();
        }
      },
      samples,
    ),
  );
  if (ctx.pgUp) {
    const url = postgres.freshPgUrl('fork');
    const schema = new URL(url).searchParams.get('schema') as string;
    const client = new pg.Client({ connectionString: postgres.PG_URL });
    await client.connect();
    const pgTables = { tasks: 'tasks', steps: 'steps', events: 'events', tags: 'task_tags' };
    figures.push(await measure(url, 'PostgreSQL', async (t) => Number((await client.query(`SELECT count(*)::int AS n FROM "${schema}".${pgTables[t]}`)).rows[0].n), samples));
    await client.end();
  }
  for (const f of figures) {
    const rows = Object.entries(f.rows)
      .map(([k, v]) => `${k} ${fmt(v, 0)}`)
      .join(', ');
    ctx.line(`    ${f.store.padEnd(10)} fork ${fmt(f.forkMs.p50, 2)} / ${fmt(f.forkMs.p99, 2)} ms (rows: ${rows});`);
    ctx.line(
      `    ${''.padEnd(10)} to the result: fork ${fmt(f.forkToResultMs, 0)} ms vs new start ${fmt(f.freshToResultMs, 0)} ms (${fmt(f.freshToResultMs / f.forkToResultMs, 1)}× faster)`,
    );
    ctx.line(
      `    ${''.padEnd(10)} engine.drift (replays ${STEPS} in a scratch copy) ${fmt(f.driftMs.p50, 1)} / ${fmt(f.driftMs.p99, 1)} ms: ${fmt(f.driftMs.p50 / f.freshToResultMs, 2)}× a new start's run`,
    );
  }
  ctx.results.fork = figures;
}
