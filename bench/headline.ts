// The three headline figures of docs/benchmarks.md, each against its yardstick, measured side by
// side in one run and printed as one table:
//   1. a PostgreSQL step against a raw autocommit INSERT of a journal-shaped row (and what a step
//      costs the database: statements, round trips, WAL bytes);
//   2. end to end against DBOS Transact, Stepwise's worker at concurrency 8, 64 and 512;
//   3. the drain against a hand-written SQL worker doing the least the same guarantees need.
// With STEPWISE_BENCH_BASE=<checkout with dist/ built>, the per-step figure of that build is
// measured in the same rounds (before/after).
import { createRequire } from 'node:module';
import { join } from 'node:path';
import pg from 'pg';
import { fmt, median, pairedOverhead, root, workerNodeFlags, type Overhead, type SectionCtx } from './lib.ts';
import { api, endToEnd, endToEndBeside, type EndToEnd, type EndToEndBeside } from './end-to-end.ts';
import { floorThroughput } from './floor.ts';
import * as postgres from './postgres.ts';
import { measureSteps, type Throughput } from './sqlite.ts';

/** What one step of a long sequential task costs the database, from one measured task. */
export interface StepAnatomy {
  statements: number;
  roundTrips: number;
  walBytes: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Api = any;

async function buildOf(dir: string): Promise<{ Engine: Api; manySteps: Api }> {
  const { Engine } = await api(dir);
  const { manySteps } = (await import(join(dir, 'bench/workflows.ts'))) as Api;
  return { Engine, manySteps };
}

/** Per-step time of a build (see `measureSteps`). */
async function stepUsOf(dir: string, n: number): Promise<number> {
  const { Engine, manySteps } = await buildOf(dir);
  const engine = new Engine({ store: postgres.freshPgUrl('head'), workflows: [manySteps] });
  const us = await measureSteps(engine, n, 4, 3);
  await engine.close();
  return us;
}

/**
 * Statements (each one round trip: the driver sends a prepared statement's bind and execute in
 * one write and waits for its answer) and WAL bytes per step: those of a whole warm task of `n`
 * steps (its start, claim, steps, end and result included) divided by `n`; the smallest of three
 * tasks (WAL is server-wide: another session's writes can only add to it).
 */
async function anatomyOf(dir: string, n: number): Promise<StepAnatomy> {
  const { Engine, manySteps } = await buildOf(dir);
  const engine = new Engine({ store: postgres.freshPgUrl('anat'), workflows: [manySteps] });
  const worker = engine.worker({ concurrency: 1, pollIntervalMs: 5 });
  const probe = new pg.Client({ connectionString: postgres.PG_URL });
  await probe.connect();
  const lsn = async (): Promise<bigint> => BigInt(((await probe.query(`SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS b`)).rows[0] as { b: string }).b);
  // The driver the build loads (its own node_modules when it is another checkout).
  const driver = createRequire(join(dir, 'dist/index.js'))('pg') as typeof pg;
  const proto = driver.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let counting = false;
  let count = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    if (counting) count++;
    return original.apply(this, args);
  };
  await worker.start();
  try {
    const once = async (): Promise<StepAnatomy> => {
      count = 0;
      const w0 = await lsn();
      counting = true;
      await engine.result((await engine.start(manySteps, { n })).id);
      counting = false;
      const wal = Number((await lsn()) - w0);
      return { statements: count / n, roundTrips: count / n, walBytes: wal / n };
    };
    await once();
    const runs = [await once(), await once(), await once()];
    return runs.reduce((a, b) => (b.walBytes < a.walBytes ? b : a));
  } finally {
    proto.query = original;
    await worker.stop();
    await engine.close();
    await probe.end();
  }
}

/** WAL bytes of one raw autocommit INSERT of a journal-shaped row (the smallest of three runs of `n`). */
async function rawWalBytes(n: number): Promise<number> {
  const c = new pg.Client({ connectionString: postgres.PG_URL });
  await c.connect();
  const s = `"stepwise_bench_rawwal_${process.pid}"`;
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${s} CASCADE; CREATE SCHEMA ${s};
      CREATE TABLE ${s}.j (task_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,
        output TEXT, error TEXT, attempts INTEGER NOT NULL, started_at BIGINT, finished_at BIGINT, wake_at BIGINT, epoch INTEGER NOT NULL,
        PRIMARY KEY (task_id, seq))`);
    const insert = (i: number): Promise<unknown> =>
      c.query({
        name: 'rawwal',
        text: `INSERT INTO ${s}.j VALUES ($1, $2, 'noop', 'step', 'completed', $3, NULL, 1, $4, $4, NULL, 1)`,
        values: ['01m8k9g3hddk0t17kke5zb66hf', i, String(i), Date.now()],
      });
    for (let i = 0; i < 200; i++) await insert(1e9 + i);
    const lsn = async (): Promise<bigint> => BigInt(((await c.query(`SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS b`)).rows[0] as { b: string }).b);
    // The smallest of three runs, as for the engine's figure.
    const runs: number[] = [];
    for (let r = 0; r < 3; r++) {
      const w0 = await lsn();
      for (let i = 0; i < n; i++) await insert(r * n + i);
      runs.push(Number((await lsn()) - w0) / n);
    }
    return Math.min(...runs);
  } finally {
    await c.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
    await c.end();
  }
}

/** Rounds measured one by one, as one {@link pairedOverhead} of them all would report them. */
function combine(rounds: Overhead[]): Overhead {
  const roundRatios = rounds.flatMap((o) => o.roundRatios);
  return {
    rawMinimalUs: median(rounds.map((o) => o.rawMinimalUs)),
    rawJournalUs: median(rounds.map((o) => o.rawJournalUs)),
    stepUs: median(rounds.map((o) => o.stepUs)),
    ratioMinimal: median(rounds.map((o) => o.ratioMinimal)),
    ratioJournal: median(roundRatios),
    roundRatios,
  };
}

export async function report({ quick, pgUp, line, results }: SectionCtx): Promise<void> {
  line('\n(headline) The three figures of the table at the top of docs/benchmarks.md, each beside its yardstick in this run.');
  if (!pgUp) {
    line(`    PostgreSQL: not reachable at ${postgres.PG_URL}; skipped.`);
    return;
  }
  const rounds = quick ? 1 : 5;
  const base = process.env.STEPWISE_BENCH_BASE;
  const out: Record<string, unknown> = {};

  // 1. Per step, paired with the raw writes around it; the base build in the same rounds, in
  // alternating order.
  const mine: Overhead[] = [];
  const theirs: Overhead[] = [];
  const once = (dir: string): Promise<Overhead> =>
    pairedOverhead(
      1,
      (shape) => postgres.rawInsertUs(1000, shape),
      () => stepUsOf(dir, 1000),
    );
  for (let r = 0; r < rounds; r++) {
    if (base && r % 2 === 1) theirs.push(await once(base));
    mine.push(await once(root));
    if (base && r % 2 === 0) theirs.push(await once(base));
  }
  const step = combine(mine);
  const baseStep = base ? combine(theirs) : null;
  const anatomy = await anatomyOf(root, 1000);
  const baseAnatomy = base ? await anatomyOf(base, 1000) : null;
  const rawWal = await rawWalBytes(1000);
  out.step = { ...step, anatomy, rawWalBytes: rawWal, ...(baseStep ? { base: { ...baseStep, anatomy: baseAnatomy } } : {}) };

  // 2. End to end: 500 concurrent start() calls, in-process worker at 8 / 64 / 512, each round
  // beside a batch of DBOS's (one warm DBOS process throughout). Without DBOS, Stepwise alone.
  const e2e: EndToEndBeside[] = [];
  const alone: EndToEnd[] = [];
  let dbosError: string | null = null;
  const dbos = await postgres.dbosServer(500).catch((e: unknown) => {
    dbosError = (e as Error).message;
    return null;
  });
  if (dbos) {
    try {
      await dbos.batch();
      await dbos.batch();
      for (const concurrency of [8, 64, 512]) e2e.push(await endToEndBeside(root, postgres.freshPgUrl(`hc${concurrency}`), concurrency, () => dbos.batch(), 500, quick ? 1 : 5));
    } finally {
      await dbos.close();
    }
  } else {
    for (const concurrency of [8, 64, 512]) alone.push(await endToEnd(root, 'this build', postgres.freshPgUrl(`hc${concurrency}`), 'postgres', 'start', 0, 500, quick ? 1 : 5, concurrency));
  }
  out.endToEnd = dbos ? e2e : alone;
  if (dbosError) out.dbosError = dbosError;

  // 3. The drain against the floor, 1 / 2 / 4 worker processes, interleaved round by round.
  const drains = new Map<number, { ours: Throughput[]; floor: Throughput[] }>();
  for (let r = 0; r < (quick ? 1 : 3); r++) {
    for (const workers of [1, 2, 4]) {
      const d = drains.get(workers) ?? { ours: [], floor: [] };
      d.ours.push(await postgres.pgThroughput(workers, 500));
      d.floor.push(await floorThroughput(workers, 500));
      drains.set(workers, d);
    }
  }
  const drainRows = [...drains].map(([workers, d]) => {
    const ours = median(d.ours.map((t) => t.stepsPerSec));
    const floor = median(d.floor.map((t) => t.stepsPerSec));
    // Each round's own fraction (Stepwise's burst over the floor's, run one after the other).
    const roundFractions = d.ours.map((t, i) => t.stepsPerSec / (d.floor[i] as Throughput).stepsPerSec);
    return {
      workers,
      stepsPerSec: ours,
      floorStepsPerSec: floor,
      fraction: median(roundFractions),
      roundFractions,
      cpu: { ours: cpuPerTask(d.ours), floor: cpuPerTask(d.floor) },
    };
  });
  out.drain = drainRows;
  out.workerNodeFlags = workerNodeFlags();
  results.headline = out;

  // The table.
  line('');
  line('| Figure (PostgreSQL) | Stepwise | Yardstick | Ratio | Goal |');
  line('|---|---|---|---|---|');
  line(
    `| 1. Per step, task of 1,000 no-op steps, 1 worker | ${fmt(step.stepUs, 0)} µs | raw autocommit INSERT of a journal row ${fmt(step.rawJournalUs, 0)} µs | **${fmt(step.ratioJournal, 2)}×** | ≤ 1.3× |`,
  );
  for (const x of alone) {
    line(
      `| 2. End to end, 500 × 3 steps, worker concurrency ${x.concurrency} | ${fmt(x.stepsPerSec, 0)} steps/s | DBOS did not run: ${dbosError ?? '?'} | – | ${x.concurrency === 64 ? '≥ 10×' : ''} |`,
    );
  }
  for (const x of e2e) {
    line(
      `| 2. End to end, 500 × 3 steps, worker concurrency ${x.concurrency} | ${fmt(x.stepsPerSec, 0)} steps/s | DBOS ${fmt(x.peerStepsPerSec, 0)} steps/s, same rounds | **${fmt(x.ratio, 1)}×** | ${x.concurrency === 64 ? '≥ 10×' : ''} |`,
    );
  }
  for (const d of drainRows) {
    line(
      `| 3. Drain, 500 × 3 steps, ${d.workers} worker process${d.workers > 1 ? 'es' : ''} | ${fmt(d.stepsPerSec, 0)} steps/s | hand-written SQL worker ${fmt(d.floorStepsPerSec, 0)} steps/s | **${fmt(d.fraction, 2)}** | ≥ 0.8 |`,
    );
  }
  line('');
  const cpuText = (c: CpuPerTask | null): string =>
    c ? `worker ${fmt(c.workerUs, 0)} µs (main thread ${fmt(c.workerMainUs, 0)} µs), PostgreSQL ${fmt(c.postgresUs, 0)} µs` : 'not measured';
  line(
    `    Drain CPU per task (medians of the bursts' CPU windows, all worker processes, all PostgreSQL processes): ${drainRows
      .map((d) => `${d.workers} process${d.workers > 1 ? 'es' : ''}: Stepwise ${cpuText(d.cpu.ours)}; floor ${cpuText(d.cpu.floor)}`)
      .join(' | ')}.`,
  );
  line(
    `    Per step, what the database does (a whole task ÷ its 1,000 steps): Stepwise ${fmt(anatomy.statements, 3)} statements, ${fmt(anatomy.roundTrips, 3)} round trips, ${fmt(anatomy.walBytes, 0)} WAL bytes; the raw INSERT 1, 1, ${fmt(rawWal, 0)}.`,
  );
  if (baseStep && baseAnatomy) {
    line(
      `    Base build (${base}), same rounds: ${fmt(baseStep.stepUs, 0)} µs, ${fmt(baseStep.ratioJournal, 2)}× the raw INSERT; ${fmt(baseAnatomy.statements, 3)} statements, ${fmt(baseAnatomy.walBytes, 0)} WAL bytes per step.`,
    );
  }
  line(`    Rounds per step ratio: ${step.roundRatios.map((r) => fmt(r, 2)).join(', ')}${baseStep ? `; base ${baseStep.roundRatios.map((r) => fmt(r, 2)).join(', ')}` : ''}.`);
  line(`    Rounds of the drain's fraction: ${drainRows.map((d) => `${d.workers} process${d.workers > 1 ? 'es' : ''} ${d.roundFractions.map((r) => fmt(r, 2)).join(', ')}`).join('; ')}.`);
  if (e2e.length) {
    line(
      `    Rounds of end to end (Stepwise's batch over DBOS's batch of the same round): ${e2e.map((x) => `concurrency ${x.concurrency} ${x.roundRatios.map((r) => fmt(r, 1)).join(', ')}`).join('; ')}.`,
    );
    line('    DBOS runs its 500 workflows at once (it has no concurrency limit for workflows started directly), in one warm process');
    line('    beside the bench; each round runs one DBOS batch and one Stepwise batch, one after the other, alternating which goes');
    line("    first, and a row's ratio is the median of its rounds' ratios.");
  }
  line('    Drain: both spans end at the time the last end-of-run write was prepared (before it');
  line('    commits), and with 500 tasks and claims of up to 256 the third and fourth process find little to claim.');
  const flags = workerNodeFlags();
  if (flags.length) line(`    Worker processes (Stepwise's and the floor's) started with Node flags ${flags.join(' ')} (STEPWISE_BENCH_WORKER_FLAGS).`);
}

interface CpuPerTask {
  workerUs: number;
  /** Of `workerUs`, the main threads' (the JavaScript); the rest is V8's and libuv's other threads. */
  workerMainUs: number;
  postgresUs: number;
}

/** The CPU a burst's processes used per task (µs): the median over the bursts that measured it, or null. */
function cpuPerTask(runs: readonly Throughput[]): CpuPerTask | null {
  const measured = runs.filter((t) => t.cpu);
  if (!measured.length) return null;
  return {
    workerUs: median(measured.map((t) => ((t.cpu as NonNullable<Throughput['cpu']>).workersMs * 1000) / t.tasks)),
    workerMainUs: median(measured.map((t) => ((t.cpu as NonNullable<Throughput['cpu']>).workersMainMs * 1000) / t.tasks)),
    postgresUs: median(measured.map((t) => ((t.cpu as NonNullable<Throughput['cpu']>).postgresMs * 1000) / t.tasks)),
  };
}
