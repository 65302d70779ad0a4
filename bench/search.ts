// `npm run bench`, (s) search: `engine.list()` with search filters on a store of 1,000,000 tasks
// (100,000 with --quick), on SQLite and PostgreSQL. The tasks are written straight into the tables
// (a million runs through workers would take an hour and measure something else): 90% succeeded,
// 8% failed (error codes RATE_LIMITED / TIMEOUT / QUOTA), 2% pending; tags tenant (997 values)
// and user (50,000 values); created one every 10 ms. Each query is timed from the call of
// `engine.list({ …, limit: 50 })` to its answer (rows decoded into summaries), over random tag
// values, and beside it the same page read by a hand-written SQL statement on the same tables
// (raw, no decoding): p50 / p99 of each, and the ratio engine ÷ raw of the p50s.
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { Engine } from '../dist/index.js';
import { fmt, percentile, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const START = Date.UTC(2026, 0, 1);
const CODES = ['RATE_LIMITED', 'TIMEOUT', 'QUOTA'];
/** Tenants: a prime, so that a tenant's tasks are spread over every status (statuses go by i % 100). */
const TENANTS = 997;

/** A task id as the engine makes them: 10 characters of time, 16 random. */
function idAt(ms: number): string {
  let time = '';
  for (let i = 0, t = ms; i < 10; i++, t = Math.floor(t / 32)) time = ALPHABET[t % 32] + time;
  return time + Array.from(randomBytes(16), (b) => ALPHABET[b % 32]).join('');
}

interface Row {
  id: string;
  status: string;
  createdAt: number;
  tenant: string;
  user: string;
  error: string | null;
}

function rowAt(i: number): Row {
  const createdAt = START + i * 10;
  const r = i % 100;
  const status = r < 90 ? 'succeeded' : r < 98 ? 'failed' : 'pending';
  const error =
    status === 'failed' ? JSON.stringify({ name: 'StepFailedError', message: 'step failed', code: 'STEP_FAILED', cause: { name: 'Error', message: 'x', code: CODES[i % 3] } }) : null;
  return { id: idAt(createdAt), status, createdAt, tenant: `t${i % TENANTS}`, user: `u${i % 50_000}`, error };
}

/** A filter of the bench, for the task `i` (a random one of the store's). */
type Query = { name: string; options: (i: number) => Record<string, unknown> };

const QUERIES: Query[] = [
  { name: 'one tag (tenant: 1 in 997 tasks)', options: (i) => ({ tags: { tenant: `t${i % TENANTS}` } }) },
  { name: 'two tags (tenant + user: 1 task)', options: (i) => ({ tags: { tenant: `t${i % TENANTS}`, user: `u${i % 50_000}` } }) },
  { name: 'tag + status failed', options: (i) => ({ tags: { tenant: `t${i % TENANTS}` }, status: 'failed' }) },
  { name: 'failedWith (8% failed, a third each code)', options: (i) => ({ failedWith: CODES[i % 3] }) },
  { name: 'created within 10 minutes', options: (i) => ({ createdAfter: START + i * 10, createdBefore: START + i * 10 + 600_000 }) },
];

async function timeQueries(
  engine: Engine,
  raw: (i: number) => Promise<unknown>,
  samples: number,
  n: number,
): Promise<Array<{ name: string; p50: number; p99: number; rawP50: number; rawP99: number }>> {
  const out = [];
  for (const q of QUERIES) {
    const eng: number[] = [];
    const rawMs: number[] = [];
    for (let s = 0; s < samples; s++) {
      const i = Math.floor(Math.random() * n);
      let t0 = performance.now();
      await engine.list({ ...q.options(i), limit: 50 } as never);
      eng.push(performance.now() - t0);
      if (q === QUERIES[0]) {
        t0 = performance.now();
        await raw(i);
        rawMs.push(performance.now() - t0);
      }
    }
    out.push({ name: q.name, p50: percentile(eng, 50), p99: percentile(eng, 99), rawP50: rawMs.length ? percentile(rawMs, 50) : NaN, rawP99: rawMs.length ? percentile(rawMs, 99) : NaN });
  }
  return out;
}

async function sqliteSection(n: number, samples: number): Promise<{ figures: Awaited<ReturnType<typeof timeQueries>>; plan: string }> {
  const path = join(tempDir(), 'search.db');
  const engine = new Engine({ store: `sqlite:${path}` });
  await engine.ready();
  const db = new Database(path);
  const insertTask = db.prepare(
    "INSERT INTO stepwise_tasks (id, workflow, workflow_version, status, input, created_at, updated_at, finished_at, error, tags) VALUES (?, 'report', '1', ?, '{}', ?, ?, ?, ?, ?)",
  );
  const insertTag = db.prepare('INSERT INTO stepwise_task_tags (key, value, task_id) VALUES (?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const r = rowAt(i);
      insertTask.run(r.id, r.status, r.createdAt, r.createdAt, r.status === 'pending' ? null : r.createdAt, r.error, JSON.stringify({ tenant: r.tenant, user: r.user }));
      insertTag.run('tenant', r.tenant, r.id);
      insertTag.run('user', r.user, r.id);
    }
  })();
  db.exec('ANALYZE');
  const rawSql =
    "SELECT t.* FROM stepwise_task_tags g JOIN stepwise_tasks t ON t.id = g.task_id WHERE g.key = 'tenant' AND g.value = ? ORDER BY g.key DESC, g.value DESC, g.task_id DESC LIMIT 50";
  const raw = db.prepare(rawSql);
  const plan = (db.prepare(`EXPLAIN QUERY PLAN ${rawSql}`).all('t1') as Array<{ detail: string }>).map((r) => r.detail).join('; ');
  const figures = await timeQueries(engine, async (i) => raw.all(`t${i % TENANTS}`), samples, n);
  db.close();
  await engine.close();
  return { figures, plan };
}

async function postgresSection(n: number, samples: number): Promise<{ figures: Awaited<ReturnType<typeof timeQueries>>; plan: string }> {
  const url = postgres.freshPgUrl('search');
  const schema = new URL(url).searchParams.get('schema') as string;
  const engine = new Engine({ store: url });
  await engine.ready();
  const client = new pg.Client({ connectionString: postgres.PG_URL });
  await client.connect();
  for (let from = 0; from < n; from += 20_000) {
    const rows = Array.from({ length: Math.min(20_000, n - from) }, (_, j) => rowAt(from + j));
    await client.query(
      `WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS r(id, status, created_at, error, tenant, usr)),
         t AS (INSERT INTO "${schema}".tasks (id, workflow, workflow_version, status, input, created_at, updated_at, finished_at, error, tags)
               SELECT id, 'report', '1', status, '{}', created_at, created_at, CASE WHEN status = 'pending' THEN NULL ELSE created_at END, error,
                      json_build_object('tenant', tenant, 'user', usr)::text FROM r)
       INSERT INTO "${schema}".task_tags (key, value, task_id) SELECT 'tenant', tenant, id FROM r UNION ALL SELECT 'user', usr, id FROM r`,
      [rows.map((r) => r.id), rows.map((r) => r.status), rows.map((r) => r.createdAt), rows.map((r) => r.error), rows.map((r) => r.tenant), rows.map((r) => r.user)],
    );
  }
  await client.query(`VACUUM ANALYZE "${schema}".tasks`);
  await client.query(`VACUUM ANALYZE "${schema}".task_tags`);
  const rawSql = `SELECT t.* FROM "${schema}".task_tags g JOIN "${schema}".tasks t ON t.id = g.task_id WHERE g.key = 'tenant' AND g.value = $1 ORDER BY g.key DESC, g.value DESC, g.task_id DESC LIMIT 50`;
  const explained = await client.query(`EXPLAIN (COSTS OFF) ${rawSql}`, ['t1']);
  const plan = explained.rows.map((r: Record<string, string>) => (r['QUERY PLAN'] as string).trim()).join('; ');
  const figures = await timeQueries(engine, async (i) => client.query({ text: rawSql, values: [`t${i % TENANTS}`], name: 'raw-tag' }), samples, n);
  await client.end();
  await engine.close();
  return { figures, plan };
}

export async function report(ctx: SectionCtx): Promise<void> {
  const n = ctx.quick ? 100_000 : 1_000_000;
  const samples = ctx.quick ? 50 : 200;
  ctx.line(`\n(s) Search: engine.list({ …, limit: 50 }) on ${fmt(n, 0)} tasks (written straight into the tables; tags tenant`);
  ctx.line(`    1 of 997 and user 1 of 50,000; 8% failed), ${samples} calls per filter with random values, call to answer;`);
  ctx.line('    raw: the same tag page by a hand-written statement on the same tables (no decoding). p50 / p99 in ms.');
  const out: Record<string, unknown> = {};
  const stores: Array<[string, () => Promise<{ figures: Awaited<ReturnType<typeof timeQueries>>; plan: string }>]> = [['SQLite', () => sqliteSection(n, samples)]];
  if (ctx.pgUp) stores.push(['PostgreSQL', () => postgresSection(n, samples)]);
  for (const [label, section] of stores) {
    const { figures, plan } = await section();
    out[label] = { tasks: n, figures, plan };
    for (const f of figures) {
      const raw = Number.isNaN(f.rawP50) ? '' : `   raw ${fmt(f.rawP50, 2)} / ${fmt(f.rawP99, 2)} (engine ÷ raw p50 ${fmt(f.p50 / f.rawP50, 2)}×)`;
      ctx.line(`    ${label.padEnd(10)} ${f.name.padEnd(42)} ${fmt(f.p50, 2).padStart(7)} / ${fmt(f.p99, 2).padStart(7)}${raw}`);
    }
    ctx.line(`    ${label} plan of a tag page: ${plan}`);
  }
  ctx.results.search = out;
}
