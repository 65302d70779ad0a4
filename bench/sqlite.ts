// SQLite benchmarks: per-step overhead against the raw write, and task throughput of one worker process.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { Engine } from '../dist/index.js';
import { WARM_UP_BURSTS, cpuBetween, cpuSample, median, pairedOverhead, spawnWorker, stopWorkers, tempDir, waitAllDone, waitNoneUnfinished, type Overhead } from './lib.ts';
import { manySteps, threeSteps } from './workflows.ts';

type Sync = 'FULL' | 'NORMAL';

/** Microseconds per single-row INSERT transaction (autocommit) on a fresh WAL file. */
export function rawInsertUs(sync: Sync, n: number, shape: 'minimal' | 'journal'): number {
  const db = new Database(join(tempDir(), 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${sync}`);
  let insert: (i: number) => void;
  if (shape === 'minimal') {
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const s = db.prepare('INSERT INTO t (v) VALUES (?)');
    insert = (i) => s.run(String(i));
  } else {
    // A hand-rolled checkpoint row: the same columns as the Stepwise journal, no fencing.
    db.exec(`CREATE TABLE j (task_no INTEGER NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
      status TEXT NOT NULL, output TEXT, error TEXT, attempts INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER,
      wake_at INTEGER, epoch INTEGER NOT NULL, PRIMARY KEY (task_no, seq)) WITHOUT ROWID`);
    const s = db.prepare('INSERT INTO j VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
    insert = (i) => s.run(1, i, 'noop', 'step', 'completed', String(i), null, 1, Date.now(), Date.now(), null, 1);
  }
  // Warm-up past the first WAL checkpoint (1,000 pages), as the engine's warm-up task does: a
  // fresh WAL file grows (and its syncs cost more) until then.
  for (let i = 0; i < 1100; i++) insert(1e9 + i);
  const t = performance.now();
  for (let i = 0; i < n; i++) insert(i);
  const us = ((performance.now() - t) * 1000) / n;
  db.close();
  return us;
}

/**
 * Microseconds per step of a task of `n` no-op steps, run by an in-process worker, at steady
 * state: six tasks warm the JIT and the WAL up (V8 needs several thousand steps to optimise the
 * whole path; the raw loop is warmed too); the median of the next three is reported.
 */
export async function stepUs(sync: Sync, n: number): Promise<number> {
  const engine = new Engine({ store: `sqlite:${join(tempDir(), 'steps.db')}?synchronous=${sync.toLowerCase()}`, workflows: [manySteps] });
  const us = await measureSteps(engine, n);
  await engine.close();
  return us;
}

/** Runs warm-up tasks, then three measured ones; the median per-step time in microseconds. */
export async function measureSteps(engine: Engine, n: number, warmup = 6, measured = 3): Promise<number> {
  const worker = engine.worker({ concurrency: 1, pollIntervalMs: 5 });
  const claimedAt = new Map<string, number>();
  const spans = new Map<string, (ms: number) => void>();
  worker.on('run:claimed', ({ taskId }) => claimedAt.set(taskId, performance.now()));
  // result() may resolve before the worker's run:finished (the finished row reaches it with the
  // commit): the span is taken from the two events, whichever comes first.
  worker.on('run:finished', ({ taskId }) => spans.get(taskId)?.(performance.now() - (claimedAt.get(taskId) as number)));
  await worker.start();
  const run = async (): Promise<number> => {
    const { id } = await engine.start(manySteps, { n });
    const span = new Promise<number>((resolve) => spans.set(id, resolve));
    await engine.result(id);
    return span;
  };
  for (let i = 0; i < warmup; i++) await run();
  const per: number[] = [];
  for (let i = 0; i < measured; i++) per.push(((await run()) * 1000) / n);
  await worker.stop();
  return median(per);
}

export interface StepOverhead extends Overhead {
  sync: Sync;
}

/** Raw writes and engine steps, round after round (see {@link pairedOverhead}). */
export async function stepOverhead(sync: Sync, rounds: number, steps = 1000): Promise<StepOverhead> {
  return {
    sync,
    ...(await pairedOverhead(
      rounds,
      (shape) => rawInsertUs(sync, steps, shape),
      () => stepUs(sync, steps),
    )),
  };
}

export interface Throughput {
  store: string;
  workers: number;
  tasks: number;
  steps: number;
  seconds: number;
  tasksPerSec: number;
  stepsPerSec: number;
  /** CPU used while the tasks ran (from their due time until none was left), where /proc tells. */
  cpu?: { wallMs: number; workersMs: number; workersMainMs: number; postgresMs: number };
}

/**
 * `tasks` tasks of three no-op steps run by `workers` worker processes. The processes first run
 * a warm-up burst, twice the batch for each process, then {@link WARM_UP_BURSTS} bursts per
 * process made as the measured ones are, not measured (as a long-lived worker is warm: V8
 * optimises the whole path only after thousands of steps, and a process that got a share of a
 * single batch was measured still cold, so more processes looked slower than they are); then
 * `bursts` times, the measured tasks are enqueued to become due all at the same moment, so that
 * the measurement (first claim → last finish, from the tasks' own history) sees them all
 * waiting, as if enqueued before the workers. A burst lasts a fraction of a second, so one
 * garbage collection or a neighbour's fsync moves it by tens of percent: the median burst is
 * reported.
 */
export async function throughput(
  db: string,
  label: string,
  tasks: number,
  workers: number,
  options: { concurrency?: number; bursts?: number; afterWarmUp?: () => Promise<void> } = {},
): Promise<Throughput> {
  const { concurrency = 256, bursts = 3, afterWarmUp } = options;
  const engine = new Engine({ store: db, workflows: [threeSteps, manySteps] });
  await engine.ready();
  const children = Array.from({ length: workers }, () => spawnWorker(db, ['--concurrency', String(concurrency)]));
  try {
    // Warmed up as the floor's workers are (bench/floor.ts): one burst, all due at once, so that the
    // batched paths the measured bursts take are the ones warmed up.
    const warm = (await engine.startMany(Array.from({ length: 2 * tasks * workers }, () => ({ workflow: threeSteps })))).map((t) => t.id);
    await waitAllDone(engine, warm);
    await afterWarmUp?.();
    const runs: Throughput[] = [];
    const pids = children.map((c) => c.pid ?? 0);
    for (let b = 0; b < WARM_UP_BURSTS * workers; b++) await burst(engine, label, tasks, workers, pids, false);
    for (let b = 0; b < bursts; b++) runs.push(await burst(engine, label, tasks, workers, pids, true));
    return [...runs].sort((x, y) => x.stepsPerSec - y.stepsPerSec)[Math.floor(runs.length / 2)] as Throughput;
  } finally {
    await stopWorkers(children);
    await engine.close();
  }
}

/** With STEPWISE_BENCH_PROFILE, starts or stops the worker processes' profiles (bench/burst-profile.mjs). */
function profileToggle(pids: readonly number[]): void {
  if (process.env.STEPWISE_BENCH_PROFILE) for (const pid of pids) process.kill(pid, 'SIGUSR2');
}

/** One burst: `tasks` tasks due at the same moment, run by the (warm) worker processes; profiled if `measured`. */
async function burst(engine: Engine, label: string, tasks: number, workers: number, pids: number[], measured: boolean): Promise<Throughput> {
  const dueAt = Date.now() + 1000 + tasks * 5;
  const ids: string[] = [];
  for (let i = 0; i < tasks; i++) ids.push((await engine.start(threeSteps, undefined, { delay: Math.max(0, dueAt - Date.now()) })).id);
  while (Date.now() < dueAt - 20) await new Promise((r) => setTimeout(r, 5));
  const before = cpuSample(pids);
  if (measured) profileToggle(pids);
  await waitNoneUnfinished(engine, 10); // the CPU window ends close to the last finish
  const after = cpuSample(pids);
  const { spanMs } = await waitAllDone(engine, ids);
  if (measured) profileToggle(pids);
  const seconds = spanMs / 1000;
  const cpu = cpuBetween(before, after);
  return { store: label, workers, tasks, steps: tasks * 3, seconds, tasksPerSec: tasks / seconds, stepsPerSec: (tasks * 3) / seconds, ...(cpu ? { cpu } : {}) };
}
