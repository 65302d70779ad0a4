// The cost of engine.idempotency.run on each backend (SQLite, PostgreSQL, Redis), as ratios to a
// bare write on the same backend, measured side by side: each round times bare writes, then runs
// of new keys (acquire + complete), then repeats of completed keys (a hit), then bare writes again;
// a ratio divides by the mean of the bare writes around it. Medians of the rounds.
import Database from 'better-sqlite3';
import pg from 'pg';
import { Redis } from 'ioredis';
import { join } from 'node:path';
import { Engine, RedisIdempotency } from '../dist/index.js';
import { fmt, median, tempDir } from './lib.ts';
import { PG_URL, freshPgUrl } from './postgres.ts';

const REDIS_URL = process.env.STEPWISE_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Backend {
  name: string;
  /** µs per bare single-row write (one round of `n`). */
  bare: (n: number) => Promise<number>;
  engine: Engine;
  close: () => Promise<void>;
}

interface Figures {
  name: string;
  bareUs: number;
  runUs: number;
  hitUs: number;
  runRatio: number;
  hitRatio: number;
}

async function usPer(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const t = performance.now();
  for (let i = 0; i < n; i++) await fn(i);
  return ((performance.now() - t) * 1000) / n;
}

let round = 0;
async function measure(b: Backend, rounds: number, n: number): Promise<Figures> {
  const runs: number[] = [];
  const hits: number[] = [];
  const bares: number[] = [];
  const runRatios: number[] = [];
  const hitRatios: number[] = [];
  await usPer(50, (i) => b.engine.idempotency.run(`warm:${i}`, () => i)); // warm up
  for (let r = 0; r < rounds; r++) {
    const tag = `${round++}`;
    const before = await b.bare(n);
    const run = await usPer(n, (i) => b.engine.idempotency.run(`k:${tag}:${i}`, () => ({ i })));
    const hit = await usPer(n, (i) => b.engine.idempotency.run(`k:${tag}:${i}`, () => ({ i })));
    const after = await b.bare(n);
    const bare = (before + after) / 2;
    bares.push(bare);
    runs.push(run);
    hits.push(hit);
    runRatios.push(run / bare);
    hitRatios.push(hit / bare);
  }
  return { name: b.name, bareUs: median(bares), runUs: median(runs), hitUs: median(hits), runRatio: median(runRatios), hitRatio: median(hitRatios) };
}

function sqliteBackend(): Backend {
  const dir = tempDir();
  const raw = new Database(join(dir, 'raw.db'));
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = FULL');
  raw.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)');
  const insert = raw.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const tx = raw.transaction((k: string) => insert.run(k, '{"i":1}'));
  let n = 0;
  const engine = new Engine({ store: `sqlite:${join(dir, 'idem.db')}` });
  return {
    name: 'SQLite (WAL, synchronous=FULL)',
    engine,
    bare: (count) => usPer(count, async () => tx.immediate(`r${n++}`)),
    close: async () => {
      raw.close();
      await engine.close();
    },
  };
}

async function postgresBackend(): Promise<Backend> {
  const url = freshPgUrl('idem');
  const schema = new URL(url).searchParams.get('schema') as string;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"; CREATE TABLE "${schema}".raw_t (k TEXT PRIMARY KEY, v TEXT)`);
  let n = 0;
  const engine = new Engine({ store: url });
  await engine.ready();
  return {
    name: 'PostgreSQL',
    engine,
    bare: (count) => usPer(count, () => client.query({ name: 'raw_idem_insert', text: `INSERT INTO "${schema}".raw_t (k, v) VALUES ($1, $2)`, values: [`r${n++}`, '{"i":1}'] })),
    close: async () => {
      await client.end();
      await engine.close();
    },
  };
}

async function redisBackend(): Promise<Backend | null> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch {
    client.disconnect();
    return null;
  }
  const prefix = `stepwise-bench:${process.pid}:`;
  const backend = new RedisIdempotency({ url: REDIS_URL, prefix });
  const engine = new Engine({ store: `sqlite:${join(tempDir(), 'unused.db')}`, idempotency: backend });
  let n = 0;
  return {
    name: 'Redis',
    engine,
    bare: (count) => usPer(count, () => client.set(`${prefix}raw:${n++}`, '{"i":1}', 'PX', 60_000)),
    close: async () => {
      await engine.close();
      await backend.close();
      const keys = await client.keys(`${prefix}*`);
      for (let i = 0; i < keys.length; i += 1000) await client.del(...keys.slice(i, i + 1000));
      client.disconnect();
    },
  };
}

/** Prints section (d) and stores its figures in `results.idempotency`. */
export async function report(o: { line: (s: string) => void; rounds: number; quick: boolean; pgUp: boolean; results: Record<string, unknown> }): Promise<void> {
  const n = o.quick ? 200 : 1000;
  o.line(`\n(d) engine.idempotency.run: ${n} sequential runs of new keys (acquire + store the result) and ${n} repeats of them`);
  o.line('    (a hit: the stored result), per call, vs one bare single-row write on the same backend, interleaved;');
  o.line(`    medians of ${o.rounds} round${o.rounds > 1 ? 's' : ''}' ratios.`);
  const figures: Figures[] = [];
  const backends: Array<() => Promise<Backend | null>> = [async () => sqliteBackend(), ...(o.pgUp ? [postgresBackend] : []), redisBackend];
  for (const make of backends) {
    const b = await make();
    if (!b) {
      o.line(`    Redis: not reachable at ${REDIS_URL}; skipped.`);
      continue;
    }
    try {
      const f = await measure(b, o.rounds, n);
      figures.push(f);
      o.line(
        `    ${f.name.padEnd(31)} bare write ${fmt(f.bareUs).padStart(7)} µs | new key ${fmt(f.runUs).padStart(7)} µs → ${fmt(f.runRatio, 2)}× | hit ${fmt(f.hitUs).padStart(7)} µs → ${fmt(f.hitRatio, 2)}×`,
      );
    } finally {
      await b.close();
    }
  }
  if (!o.pgUp) o.line(`    PostgreSQL: not reachable at ${PG_URL}; skipped.`);
  o.results.idempotency = figures;
}
