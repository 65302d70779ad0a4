// `npm run bench`, scale: (g) claim latency and steps/s with 10,000 and with 1,000,000 finished
// tasks in the tables, and (h) a worker's memory with 100,000 tasks parked on waitForEvent.
// `--scale-only` runs just this section; `--quick` uses 100,000 instead of 1,000,000 finished tasks
// and 10,000 parked tasks.
//
// The finished tasks are copies of real ones: a warm-up runs 1,000 tasks through the engine, and a
// set-based statement (generate_series on PostgreSQL, a recursive CTE on SQLite, in one
// transaction) copies their task rows, journal rows and log entries under new ids, with every
// time shifted to a creation time before the measured tasks, so the claim, list and finish paths
// see the rows, indexes and statistics of a long-running installation. Columns are read from the
// schema, so a column a later migration adds is copied too. Then ANALYZE, then the engine is
// measured: the p50/p99 of the worker's claim calls (timed around the store's claim) and the
// steps/s of 500 tasks × 3 steps submitted with startMany until every result() resolved.
import Database from 'better-sqlite3';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';
import { Engine, workflow, type Workflow } from '../dist/index.js';
import { fmt, median, percentile, root, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { threeSteps } from './workflows.ts';

type Store = Awaited<ReturnType<Engine['ready']>>;

/** Waits for one event: a task parked until a signal that never comes. */
const parkedOnEvent = workflow('bench-parked', async (ctx) => ctx.waitForEvent<unknown>('go'));

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** A task id (see src/ids.ts: 10 base32 digits of ms, 16 more) for copy `g` created at `ms`. */
function copyId(ms: number, g: number): string {
  let time = '';
  for (let i = 0, t = ms; i < 10; i++, t = Math.floor(t / 32)) time = ALPHABET[t % 32] + time;
  let tail = '';
  for (let i = 0, x = g; i < 16; i++, x = Math.floor(x / 32)) tail = ALPHABET[x % 32] + tail;
  return time + tail;
}

/** Columns whose values are times (ms): shifted by each copy's offset. */
const TIMES = new Set(['run_at', 'created_at', 'updated_at', 'finished_at', 'lease_expires_at', 'deadline_at', 'started_at', 'wake_at', 'at']);

export interface ScalePoint {
  store: string;
  finished: number;
  /** Seconds the set-based fill (and ANALYZE) took to reach `finished`. */
  fillSeconds: number;
  /** A worker's claim call that took one task (a task started while the worker was idle). */
  claimOneP50Ms: number;
  claimOneP99Ms: number;
  claimOneSamples: number;
  /** The worker's claim calls during the 500-task bursts (each takes up to 256 tasks). */
  claimBurstP50Ms: number;
  claimBurstP99Ms: number;
  claimBurstSamples: number;
  /** 500 tasks × 3 no-op steps, startMany → every result() resolved, median of the bursts. */
  stepsPerSec: number;
  seconds: number;
}

interface Filler {
  /** Finished tasks in the store now. */
  count(): Promise<number>;
  /** Adds `n` copies of the template tasks, created before `beforeMs`. */
  fill(templates: string[], n: number, beforeMs: number): Promise<void>;
  analyze(): Promise<void>;
  explainClaim?(): Promise<string>;
  close(): Promise<void>;
}

function pgFiller(url: string): Filler {
  const schema = new URL(url).searchParams.get('schema') as string;
  const s = `"${schema}"`;
  const client = new pg.Client({ connectionString: postgres.PG_URL });
  const connected = client.connect();
  const columns = async (table: string): Promise<string[]> => {
    await connected;
    const r = await client.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, [
      schema,
      table,
    ]);
    return r.rows.map((x) => x.column_name);
  };
  // The id of copy g in SQL (the same digits as copyId): 10 digits of its creation ms, 16 of g.
  const digits = (x: string, n: number): string =>
    `(SELECT string_agg(substr('${ALPHABET}', ((${x} >> (5 * (${n - 1} - i))) & 31)::int + 1, 1), '' ORDER BY i) FROM generate_series(0, ${n - 1}) i)`;
  return {
    async count() {
      await connected;
      return Number((await client.query(`SELECT count(*) AS n FROM ${s}.tasks WHERE status = 'succeeded'`)).rows[0].n);
    },
    async fill(templates, n, beforeMs) {
      const [tasks, steps, events] = [await columns('tasks'), await columns('steps'), await columns('events')];
      const expr = (col: string, idCol: string): string => (col === idCol ? 'f.id' : TIMES.has(col) ? `t.${col} + f.shift` : `t.${col}`);
      await client.query('BEGIN');
      try {
        await client.query(
          `CREATE TEMP TABLE scale_tpl ON COMMIT DROP AS
            SELECT id, created_at, (row_number() OVER (ORDER BY id) - 1)::int AS k FROM ${s}.tasks WHERE id = ANY($1::text[])`,
          [templates],
        );
        await client.query(`CREATE TEMP TABLE scale_fill ON COMMIT DROP AS
            SELECT ${digits(`(${beforeMs}::bigint - ${n} + g)`, 10)} || '0000' || ${digits('g::bigint', 12)} AS id, p.id AS tpl,
              (${beforeMs}::bigint - ${n} + g) - p.created_at AS shift
            FROM generate_series(1, ${n}) g JOIN scale_tpl p ON p.k = g % ${templates.length}`);
        await client.query(`INSERT INTO ${s}.tasks (${tasks.join(', ')})
            SELECT ${tasks.map((c) => expr(c, 'id')).join(', ')} FROM scale_fill f JOIN ${s}.tasks t ON t.id = f.tpl`);
        await client.query(`INSERT INTO ${s}.steps (${steps.join(', ')})
            SELECT ${steps.map((c) => expr(c, 'task_id')).join(', ')} FROM scale_fill f JOIN ${s}.steps t ON t.task_id = f.tpl`);
        const ev = events.filter((c) => c !== 'id' && c !== 'xid');
        await client.query(`INSERT INTO ${s}.events (${ev.join(', ')})
            SELECT ${ev.map((c) => expr(c, 'task_id')).join(', ')} FROM scale_fill f JOIN ${s}.events t ON t.task_id = f.tpl`);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK');
        throw e;
      }
    },
    async analyze() {
      await client.query(`VACUUM ANALYZE ${s}.tasks, ${s}.steps, ${s}.events`);
    },
    async explainClaim() {
      // The candidate part of the uncapped claim (src/postgres/claim.ts), as a worker sends it.
      const r = await client.query(
        `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id, status FROM ${s}.tasks
          WHERE status IN ('pending', 'waiting') AND run_at <= $1 AND workflow = ANY($2::text[])
          ORDER BY run_at, id LIMIT 256 FOR UPDATE SKIP LOCKED`,
        [Date.now(), ['bench-three-steps']],
      );
      return r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
    },
    async close() {
      await client.end();
    },
  };
}

function sqliteFiller(file: string): Filler {
  const db = new Database(file);
  db.pragma('busy_timeout = 60000');
  db.function('scale_id', (ms: number | bigint, g: number | bigint) => copyId(Number(ms), Number(g)));
  const columns = (table: string): string[] => (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name);
  return {
    async count() {
      return Number((db.prepare(`SELECT count(*) AS n FROM stepwise_tasks WHERE status = 'succeeded'`).get() as { n: number }).n);
    },
    async fill(templates, n, beforeMs) {
      const tasks = columns('stepwise_tasks').filter((c) => c !== 'no');
      const steps = columns('stepwise_steps');
      const events = columns('stepwise_events').filter((c) => c !== 'id');
      const expr = (col: string): string => (col === 'id' ? 'f.id' : col === 'task_no' ? 'n.no' : TIMES.has(col) ? `t.${col} + f.shift` : `t.${col}`);
      db.transaction(() => {
        db.exec('DROP TABLE IF EXISTS temp.scale_tpl; DROP TABLE IF EXISTS temp.scale_fill');
        db.exec('CREATE TEMP TABLE scale_tpl (k INTEGER PRIMARY KEY, no INTEGER, created_at INTEGER)');
        const tpl = db.prepare('INSERT INTO scale_tpl SELECT ?, no, created_at FROM stepwise_tasks WHERE id = ?');
        templates.forEach((id, k) => tpl.run(k, id));
        db.exec(`CREATE TEMP TABLE scale_fill AS
            WITH RECURSIVE g(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM g WHERE g < ${n})
            SELECT scale_id(${beforeMs} - ${n} + g, g) AS id, p.no AS tpl, (${beforeMs} - ${n} + g) - p.created_at AS shift
            FROM g JOIN scale_tpl p ON p.k = g % ${templates.length}`);
        db.exec(`INSERT INTO stepwise_tasks (${tasks.join(', ')})
            SELECT ${tasks.map(expr).join(', ')} FROM scale_fill f JOIN stepwise_tasks t ON t.no = f.tpl`);
        db.exec(`INSERT INTO stepwise_steps (${steps.join(', ')})
            SELECT ${steps.map(expr).join(', ')} FROM scale_fill f JOIN stepwise_tasks n ON n.id = f.id JOIN stepwise_steps t ON t.task_no = f.tpl`);
        db.exec(`INSERT INTO stepwise_events (${events.join(', ')})
            SELECT ${events.map(expr).join(', ')} FROM scale_fill f JOIN stepwise_tasks n ON n.id = f.id JOIN stepwise_events t ON t.task_no = f.tpl`);
        db.exec('DROP TABLE temp.scale_tpl; DROP TABLE temp.scale_fill');
      })();
    },
    async analyze() {
      db.exec('ANALYZE');
    },
    async close() {
      db.close();
    },
  };
}

/** Claims of one task measured per store and size: enough for a p99 that is not just the worst one. */
const SINGLE_SAMPLES = 500;

/** Times every claim call of the engine's store (the worker claims through it). */
function spyOnClaims(store: Store): { samples: Array<{ ms: number; tasks: number }>; on: boolean } {
  const spy = { samples: [] as Array<{ ms: number; tasks: number }>, on: false };
  const claim = store.claim.bind(store);
  store.claim = async (request) => {
    const t0 = performance.now();
    const out = await claim(request);
    if (spy.on && out.length) spy.samples.push({ ms: performance.now() - t0, tasks: out.length });
    return out;
  };
  return spy;
}

/** One store filled to `size` finished tasks, with a warm engine and worker, ready to be measured. */
interface Rig {
  store: 'postgres' | 'sqlite';
  size: number;
  fillSeconds: number;
  engine: Engine;
  close: () => Promise<void>;
  spy: ReturnType<typeof spyOnClaims>;
  bursts: number[];
  inBursts: number[];
  ones: number[];
}

/** A store of `size` finished tasks: 1,000 run by the engine (the templates), the rest copied. */
async function rig(url: string, store: Rig['store'], size: number, line: (s: string) => void, explain: boolean): Promise<Rig> {
  const engine = new Engine({ store: url, workflows: [threeSteps] });
  const spy = spyOnClaims(await engine.ready());
  const worker = engine.worker({ concurrency: 256 });
  await worker.start();
  const filler = store === 'postgres' ? pgFiller(url) : sqliteFiller(new URL(url.replace(/^sqlite:/, 'file:')).pathname);
  const r: Rig = {
    store,
    size,
    fillSeconds: 0,
    engine,
    spy,
    bursts: [],
    inBursts: [],
    ones: [],
    close: async () => {
      await worker.stop();
      await engine.close();
      await filler.close();
    },
  };
  try {
    const templates: string[] = [];
    for (let b = 0; b < 2; b++) {
      const handles = await engine.startMany(Array.from({ length: 500 }, () => ({ workflow: threeSteps })));
      await Promise.all(handles.map((h) => engine.result(h.id, { timeout: '600s' })));
      templates.push(...handles.map((h) => h.id));
    }
    const t0 = performance.now();
    const missing = size - (await filler.count());
    if (missing > 0) await filler.fill(templates, missing, (await engine.get(templates[0] as string)).createdAt);
    await filler.analyze();
    r.fillSeconds = (performance.now() - t0) / 1000;
    if (explain && filler.explainClaim) line(`      EXPLAIN of the claim's candidate scan, ${store}, ${fmt(size, 0)} finished:\n${(await filler.explainClaim()).replace(/^/gm, '        ')}`);
    await burst(engine); // once at this size before measuring (plans, caches)
    return r;
  } catch (e) {
    await r.close();
    throw e;
  }
}

/** 500 tasks × 3 no-op steps by one startMany until every result() resolved: seconds. */
async function burst(engine: Engine): Promise<number> {
  const t0 = performance.now();
  const handles = await engine.startMany(Array.from({ length: 500 }, () => ({ workflow: threeSteps })));
  await Promise.all(handles.map((h) => engine.result(h.id, { timeout: '600s' })));
  return (performance.now() - t0) / 1000;
}

/** One measured round on a rig: a burst, then `singles` tasks started one at a time. */
async function round(r: Rig, singles: number): Promise<void> {
  r.spy.samples = [];
  r.spy.on = true;
  r.bursts.push(await burst(r.engine));
  r.inBursts.push(...r.spy.samples.map((x) => x.ms));
  r.spy.samples = [];
  for (let i = 0; i < singles; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    await r.engine.result((await r.engine.start(threeSteps)).id, { timeout: '60s' });
  }
  r.ones.push(...r.spy.samples.filter((x) => x.tasks === 1).map((x) => x.ms));
  r.spy.on = false;
}

/**
 * Claim latency and steps/s at each size, measured side by side: one store per size, all warm,
 * then `rounds` rounds that measure each store in turn (a drift of the machine's load moves all
 * sizes alike, and no size is measured colder than another).
 */
export async function atScale(urls: readonly string[], store: Rig['store'], sizes: readonly number[], line: (s: string) => void, explain: boolean, rounds: number): Promise<ScalePoint[]> {
  const rigs: Rig[] = [];
  try {
    for (const [i, size] of sizes.entries()) rigs.push(await rig(urls[i] as string, store, size, line, explain));
    const singles = Math.ceil(SINGLE_SAMPLES / rounds);
    for (let k = 0; k < rounds; k++) for (const r of rigs) await round(r, singles);
  } finally {
    for (const r of rigs) await r.close();
  }
  return rigs.map((r) => {
    const seconds = median(r.bursts);
    const p: ScalePoint = {
      store,
      finished: r.size,
      fillSeconds: r.fillSeconds,
      claimOneP50Ms: percentile(r.ones, 50),
      claimOneP99Ms: percentile(r.ones, 99),
      claimOneSamples: r.ones.length,
      claimBurstP50Ms: percentile(r.inBursts, 50),
      claimBurstP99Ms: percentile(r.inBursts, 99),
      claimBurstSamples: r.inBursts.length,
      stepsPerSec: 1500 / seconds,
      seconds,
    };
    line(
      `    ${store.padEnd(10)} ${fmt(r.size, 0).padStart(9)} finished (filled in ${fmt(r.fillSeconds, 0)} s): claim of one task p50 ${fmt(p.claimOneP50Ms, 2)} ms p99 ${fmt(p.claimOneP99Ms, 2)} ms (${p.claimOneSamples}); ` +
        `claims in bursts p50 ${fmt(p.claimBurstP50Ms, 1)} ms p99 ${fmt(p.claimBurstP99Ms, 1)} ms (${p.claimBurstSamples}); ${fmt(p.stepsPerSec, 0)} steps/s (median of ${r.bursts.length})`,
    );
    return p;
  });
}

export interface ParkedMemory {
  store: string;
  parked: number;
  /** Heap used and RSS (MB) after a full GC, at each count of parked tasks. */
  samples: Array<{ parked: number; heapMb: number; rssMb: number }>;
  parkSeconds: number;
}

/** A full garbage collection (the flag is set at run time, so the bench needs no node option). */
function gc(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

export interface ParkOptions {
  /** The workflow whose tasks park (they must reach `waiting` and stay there). */
  parks: Workflow;
  concurrency: number;
}

/**
 * One in-process worker parks `total` tasks of `parks` (default: on waitForEvent, concurrency 256);
 * its memory after a full GC, after 1,000 warm-up tasks, half way, and with all parked. The tasks
 * are started by a second engine on the same store, so nothing the starting side keeps is counted.
 */
export async function parkedMemory(
  url: string,
  store: string,
  total: number,
  line: (s: string) => void,
  opts: ParkOptions = { parks: parkedOnEvent, concurrency: 256 },
): Promise<ParkedMemory> {
  const engine = new Engine({ store: url, workflows: [opts.parks] });
  await engine.ready();
  const starter = new Engine({ store: url, workflows: [opts.parks] });
  await starter.ready();
  const worker = engine.worker({ concurrency: opts.concurrency });
  await worker.start();
  const allParked = async (): Promise<void> => {
    while ((await starter.list({ status: ['pending', 'running'], limit: 1 })).tasks.length) await new Promise((r) => setTimeout(r, 100));
  };
  const sample = (parked: number): { parked: number; heapMb: number; rssMb: number } => {
    gc();
    const m = process.memoryUsage();
    return { parked, heapMb: m.heapUsed / 2 ** 20, rssMb: m.rss / 2 ** 20 };
  };
  const start = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i += 10_000) await starter.startMany(Array.from({ length: Math.min(10_000, n - i) }, () => ({ workflow: opts.parks })));
  };
  try {
    await start(1000); // warm-up: code paths, pools, caches
    await allParked();
    const samples = [sample(1000)];
    const t0 = performance.now();
    for (const step of [total / 2, total / 2]) {
      await start(step);
      await allParked();
      samples.push(sample((samples.at(-1)?.parked ?? 0) + step));
    }
    const parkSeconds = (performance.now() - t0) / 1000;
    // On a fresh store with none left pending or running, every task is parked unless one ended.
    const [ended] = (await starter.list({ status: ['succeeded', 'failed', 'cancelled'], limit: 1 })).tasks;
    if (ended) throw new Error(`task ${ended.id} ended ${ended.status} instead of parking`);
    if (!(await starter.list({ status: 'waiting', limit: 1 })).tasks.length) throw new Error('no task parked');
    line(
      `    ${store.padEnd(10)} ${samples.map((x) => `${fmt(x.parked, 0)} parked: heap ${fmt(x.heapMb, 1)} MB, RSS ${fmt(x.rssMb, 0)} MB`).join(' | ')}  (parked ${fmt(total, 0)} in ${fmt(parkSeconds, 0)} s)`,
    );
    return { store, parked: total, samples, parkSeconds };
  } finally {
    await worker.stop();
    await starter.close();
    await engine.close();
  }
}

export async function run({ quick, pgUp, line, results }: SectionCtx): Promise<void> {
  const big = quick ? 100_000 : 1_000_000;
  const parked = quick ? 10_000 : 100_000;
  const sizes = [10_000, big];
  const rounds = quick ? 3 : 5;
  line(`\n(g) Scale: claim latency and steps/s with 10,000 and ${fmt(big, 0)} finished tasks in the tables (copies of real`);
  line('    finished tasks with their journal and log rows, filled set-based, then ANALYZE). In-process worker, concurrency 256.');
  line(`    "claim of one task": the worker's store.claim call for a task started while it was idle (${SINGLE_SAMPLES} samples: p99 is the 5th worst);`);
  line(`    steps/s: 500 tasks × 3 no-op steps by one startMany until every result() resolved. One store per size, all warm,`);
  line(`    measured in turn, ${rounds} rounds (a burst and ${Math.ceil(SINGLE_SAMPLES / rounds)} single tasks each); the median burst.`);
  const points: ScalePoint[] = [];
  const explain = process.argv.includes('--explain');
  if (pgUp)
    points.push(
      ...(await atScale(
        sizes.map((n) => postgres.freshPgUrl(`scale${n}`)),
        'postgres',
        sizes,
        line,
        explain,
        rounds,
      )),
    );
  const dir = tempDir();
  points.push(
    ...(await atScale(
      sizes.map((n) => `sqlite:${join(dir, `scale${n}.db`)}`),
      'sqlite',
      sizes,
      line,
      false,
      rounds,
    )),
  );
  rmSync(dir, { recursive: true, force: true }); // the 1M-task file is most of a gigabyte
  for (const store of ['postgres', 'sqlite']) {
    const [small, large] = points.filter((p) => p.store === store);
    if (small && large) {
      line(
        `    → ${store} at ${fmt(big, 0)} ÷ at 10,000: claim of one task p50 ${fmt(large.claimOneP50Ms / small.claimOneP50Ms, 2)}×, ` +
          `p99 ${fmt(large.claimOneP99Ms / small.claimOneP99Ms, 2)}×; steps/s ${fmt(large.stepsPerSec / small.stepsPerSec, 2)}× (target: latency ≤ 2×)`,
      );
    }
  }
  results.scale = points;
  line(`\n(h) Worker memory with ${fmt(parked, 0)} tasks parked on waitForEvent (one in-process worker, concurrency 256;`);
  line('    heap used and RSS after a full GC, after 1,000 warm-up tasks, half way, and with all parked).');
  const mem: ParkedMemory[] = [];
  if (pgUp) mem.push(await parkedMemory(postgres.freshPgUrl('parked'), 'postgres', parked, line));
  mem.push(await parkedMemory(`sqlite:${join(tempDir(), 'parked.db')}`, 'sqlite', parked, line));
  results.parkedMemory = mem;
}

/** `--scale-only`: this section alone, written to .bench/results.json. */
export async function only(ctx: SectionCtx): Promise<never> {
  await run(ctx);
  if (ctx.pgUp) await postgres.cleanup();
  mkdirSync(join(root, '.bench'), { recursive: true });
  writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(ctx.results, null, 2)}\n`);
  process.exit(0);
}
