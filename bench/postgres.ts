// PostgreSQL benchmarks: per-step overhead against the raw write, throughput with 1, 2 and 4
// worker processes, DBOS Transact on the same work, and wake-up latency.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { Engine } from '../dist/index.js';
import { median, pairedOverhead, percentile, root, spawnWorker, stopWorkers, type Overhead } from './lib.ts';
import { measureSteps, throughput, type Throughput } from './sqlite.ts';
import { manySteps, stamp } from './workflows.ts';

export const PG_URL = process.env.STEPWISE_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schemas: string[] = [];

export async function pgAvailable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function sql(text: string, values: unknown[] = []): Promise<void> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(text, values);
  } finally {
    await c.end();
  }
}

/** A store URL on a schema of its own (dropped by `cleanup`). */
export function freshPgUrl(label: string): string {
  const schema = `stepwise_bench_${label}_${process.pid}_${schemas.length}`;
  schemas.push(schema);
  return `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
}

export async function cleanup(): Promise<void> {
  for (const s of schemas.splice(0)) await sql(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
}

/** Microseconds per single-row INSERT transaction (autocommit, prepared), awaited one by one. */
export async function rawInsertUs(n: number, shape: 'minimal' | 'journal'): Promise<number> {
  const schema = `stepwise_bench_raw_${process.pid}`;
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; CREATE SCHEMA "${schema}"`);
    let insert: (i: number) => Promise<unknown>;
    if (shape === 'minimal') {
      await c.query(`CREATE TABLE "${schema}".t (id BIGSERIAL PRIMARY KEY, v TEXT)`);
      insert = (i) => c.query({ name: 'raw-min', text: `INSERT INTO "${schema}".t (v) VALUES ($1)`, values: [String(i)] });
    } else {
      await c.query(`CREATE TABLE "${schema}".j (task_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
        status TEXT NOT NULL, output TEXT, error TEXT, attempts INTEGER NOT NULL, started_at BIGINT, finished_at BIGINT, wake_at BIGINT,
        epoch INTEGER NOT NULL, PRIMARY KEY (task_id, seq))`);
      insert = (i) =>
        c.query({
          name: 'raw-journal',
          text: `INSERT INTO "${schema}".j VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
          values: ['01m8k9g3hddk0t17kke5zb66hf', i, 'noop', 'step', 'completed', String(i), null, 1, Date.now(), Date.now(), null, 1],
        });
    }
    // Warm-up to a steady state, as the engine's warm-up tasks do (a new backend and table start slow).
    for (let i = 0; i < 1000; i++) await insert(1e9 + i);
    const t = performance.now();
    for (let i = 0; i < n; i++) await insert(i);
    return ((performance.now() - t) * 1000) / n;
  } finally {
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
}

/** Microseconds per step of a task of `n` no-op steps on PostgreSQL, at steady state (see measureSteps). */
export async function stepUs(n: number): Promise<number> {
  const engine = new Engine({ store: freshPgUrl('steps'), workflows: [manySteps] });
  const us = await measureSteps(engine, n, 4, 3);
  await engine.close();
  return us;
}

/**
 * Microseconds per step of one task of `n` no-op steps on PostgreSQL from `engine.start()` to
 * `engine.result()` resolving, with a warm in-process worker: the span DBOS's per-step figure
 * covers (its workflow called and awaited in-process). Two warm-up tasks, the median of three.
 */
export async function callToAnswerUs(n: number): Promise<number> {
  const engine = new Engine({ store: freshPgUrl('call'), workflows: [manySteps] });
  const worker = engine.worker({ concurrency: 1, pollIntervalMs: 5 });
  await worker.start();
  try {
    const once = async (): Promise<number> => {
      const t0 = performance.now();
      await engine.result((await engine.start(manySteps, { n })).id);
      return ((performance.now() - t0) * 1000) / n;
    };
    await once();
    await once();
    return median([await once(), await once(), await once()]);
  } finally {
    await worker.stop();
    await engine.close();
  }
}

export type PgOverhead = Overhead;

/** Raw inserts and engine steps, round after round (see {@link pairedOverhead}). */
export async function stepOverhead(rounds: number, steps = 1000): Promise<PgOverhead> {
  return pairedOverhead(
    rounds,
    (shape) => rawInsertUs(steps, shape),
    () => stepUs(steps),
  );
}

/**
 * Throughput on a fresh schema, analyzed after the warm-up: a database in service has statistics
 * (autovacuum analyzes tables as they grow), and without them the planner scans the whole tasks
 * table for the harness's "anything left?" query, which it polls while the workers run.
 */
export async function pgThroughput(workers: number, tasks: number, concurrency = 256): Promise<Throughput> {
  const url = freshPgUrl(`tp${workers}`);
  const schema = new URL(url).searchParams.get('schema') as string;
  return throughput(url, 'postgres', tasks, workers, {
    concurrency,
    afterWarmUp: () => sql(`ANALYZE "${schema}".tasks, "${schema}".task_heads, "${schema}".steps, "${schema}".events`),
  });
}

export interface DbosResult {
  version: string;
  tasks: number;
  concurrentS: number;
  tasksPerSec: number;
  stepsPerSec: number;
  perStepUs: number;
}

/** DBOS Transact on the same work (bench/peers/dbos.mjs). */
export function dbos(tasks: number, longSteps: number): DbosResult | { error: string } {
  return runDbos<DbosResult>('dbos.mjs', [String(tasks), String(longSteps)]);
}

/**
 * Runs a DBOS Transact script of bench/peers (installed there on first use) on the same database,
 * in a schema of its own dropped afterwards; its last line of output is its JSON result.
 */
export function runDbos<T>(script: string, args: string[]): T | { error: string } {
  const dir = peersDir();
  if (typeof dir !== 'string') return dir;
  const schema = `stepwise_bench_dbos_${process.pid}_${script.replace(/\W/g, '_')}`;
  try {
    const out = execFileSync(process.execPath, [join(dir, script), PG_URL, schema, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const line = out.trim().split('\n').at(-1) as string;
    return JSON.parse(line) as T;
  } catch (e) {
    return { error: (e as Error).message };
  } finally {
    void sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  }
}

/** bench/peers with its packages installed (on first use), or why not. */
function peersDir(): string | { error: string } {
  const dir = join(root, 'bench/peers');
  if (!existsSync(join(dir, 'node_modules/@dbos-inc/dbos-sdk'))) {
    const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
    if (r.status !== 0) return { error: 'npm ci in bench/peers failed (DBOS Transact not installed)' };
  }
  return dir;
}

/** A warm DBOS Transact process that runs one batch of `tasks` three-step workflows when asked. */
export interface DbosServer {
  /** Seconds from DBOS's first startWorkflow to its last result, for one batch. */
  batch(): Promise<number>;
  close(): Promise<void>;
}

/**
 * Starts bench/peers/dbos.mjs in `--serve` mode on the same database (a schema of its own, dropped
 * at close): launched and idle until `batch()` is called, so that its batches can alternate with
 * Stepwise's in one run.
 */
export async function dbosServer(tasks: number): Promise<DbosServer> {
  const dir = peersDir();
  if (typeof dir !== 'string') throw new Error(dir.error);
  const schema = `stepwise_bench_dbos_${process.pid}_served`;
  const child = spawn(process.execPath, [join(dir, 'dbos.mjs'), PG_URL, schema, String(tasks), '0', '--serve'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.stdin.on('error', () => undefined); // a child that died: its exit is what the caller hears of
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  /** The child's next answer (a JSON object line; anything else it prints is skipped). */
  const next = async (): Promise<Record<string, unknown>> => {
    for (;;) {
      const r = await lines.next();
      if (r.done) throw new Error('DBOS Transact exited before answering (its own output above says why)');
      if (r.value.startsWith('{')) return JSON.parse(r.value) as Record<string, unknown>;
    }
  };
  const close = async (): Promise<void> => {
    try {
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin.end('quit\n');
        const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(timer);
      }
    } finally {
      await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  };
  try {
    await next(); // { ready }
  } catch (e) {
    child.kill('SIGKILL');
    await close();
    throw e;
  }
  return {
    async batch() {
      child.stdin.write('batch\n');
      return (await next()).seconds as number;
    },
    close,
  };
}

export interface Latency {
  store: string;
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Start → first step running, with a worker in another process that is idle when the task is
 * started: measured by a first step that returns the time it began (same machine, same clock).
 */
export async function wakeLatency(db: string, label: string, samples: number, pollMs: number): Promise<Latency> {
  const engine = new Engine({ store: db, workflows: [stamp] });
  await engine.ready();
  const child = spawnWorker(db, ['--poll-ms', String(pollMs)]);
  try {
    const warm = await engine.start(stamp);
    await engine.result(warm.id, { timeout: '60s' });
    const lat: number[] = [];
    for (let i = 0; i < samples; i++) {
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30)); // the worker is idle again
      const t0 = Date.now();
      const { id } = await engine.start(stamp);
      const began = await engine.result<number>(id, { timeout: '60s' });
      lat.push(began - t0);
    }
    return { store: label, samples, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
  } finally {
    await stopWorkers([child]);
    await engine.close();
  }
}
