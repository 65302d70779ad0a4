// Small helpers for the benchmark: timing, medians, temp dirs, spawning workers.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Engine, type TaskStatus } from '../dist/index.js';

export const root = new URL('..', import.meta.url).pathname;

export function tempDir(prefix = 'stepwise-bench-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

/** What a bench section's `report` is given: quick mode, whether PostgreSQL is up, where to print, where to put its figures. */
export interface SectionCtx {
  quick: boolean;
  pgUp: boolean;
  line: (s: string) => void;
  results: Record<string, unknown>;
}

export interface Overhead {
  rawMinimalUs: number;
  rawJournalUs: number;
  stepUs: number;
  /** Medians of the rounds' own ratios (each step figure against the raw writes around it). */
  ratioMinimal: number;
  ratioJournal: number;
  /** Each round's step ÷ journal-row ratio. */
  roundRatios: number[];
}

/**
 * Per-step overhead, measured in `rounds` rounds of: raw journal row, raw minimal row, engine
 * steps, raw minimal row, raw journal row. Each round's ratio divides its step figure by the mean
 * of the raw writes just before and after it, so that a drift of the disk's sync time during the
 * run (on a shared machine it moves by tens of percent) moves both sides of a ratio alike.
 */
export async function pairedOverhead(rounds: number, raw: (shape: 'minimal' | 'journal') => number | Promise<number>, step: () => Promise<number>): Promise<Overhead> {
  const rawM: number[] = [];
  const rawJ: number[] = [];
  const steps: number[] = [];
  const ratioM: number[] = [];
  const ratioJ: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const j1 = await raw('journal');
    const m1 = await raw('minimal');
    const s = await step();
    const m = (m1 + (await raw('minimal'))) / 2;
    const j = (j1 + (await raw('journal'))) / 2;
    rawM.push(m);
    rawJ.push(j);
    steps.push(s);
    ratioM.push(s / m);
    ratioJ.push(s / j);
  }
  return {
    rawMinimalUs: median(rawM),
    rawJournalUs: median(rawJ),
    stepUs: median(steps),
    ratioMinimal: median(ratioM),
    ratioJournal: median(ratioJ),
    roundRatios: ratioJ,
  };
}

/**
 * Bursts a drain runs before the measured ones, per worker process (a process runs part of each
 * burst), made as the measured ones are and not measured, for Stepwise's worker processes and the
 * floor's alike. V8 optimises a function once it has run enough: a fresh Stepwise worker process
 * drains its first burst at about a third of the pace of its fifth and later ones, and the next
 * three at about three quarters, while it compiles the path of a batch (docs/benchmarks.md,
 * Figures, 2026-12-07 midday). Measured before that, the drain is a fresh process's, not a
 * long-lived worker's.
 */
export const WARM_UP_BURSTS = 4;

/**
 * Node's own flags for the worker processes the bench starts, Stepwise's and the floor's alike:
 * `STEPWISE_BENCH_WORKER_FLAGS="--max-semi-space-size=64 --min-semi-space-size=64"` measures the
 * drain with the young generation docs/operations.md suggests for busy workers. None by default.
 */
export function workerNodeFlags(): string[] {
  const flags = process.env.STEPWISE_BENCH_WORKER_FLAGS?.trim();
  return flags ? flags.split(/\s+/) : [];
}

/** A worker process of the build in `from` (this checkout by default) running bench/workflows.ts. */
export function spawnWorker(db: string, extra: string[] = [], env: Record<string, string> = {}, from = root): ChildProcess {
  return spawn(process.execPath, [...workerNodeFlags(), join(from, 'dist/cli/main.js'), 'worker', join(from, 'bench/workflows.ts'), '--db', db, '--quiet', ...extra], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ...profiling(), ...env },
  });
}

/** With STEPWISE_BENCH_PROFILE=<directory>, the worker processes load bench/burst-profile.mjs. */
function profiling(): Record<string, string> {
  const dir = process.env.STEPWISE_BENCH_PROFILE;
  if (!dir) return {};
  mkdirSync(dir, { recursive: true });
  return { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(join(root, 'bench/burst-profile.mjs')).href}`.trim() };
}

export async function stopWorkers(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
        }),
    ),
  );
}

/**
 * Waits until none of the tasks is unfinished; returns the span from first claim to last finish.
 */
export async function waitAllDone(engine: Engine, ids: string[]): Promise<{ spanMs: number; firstClaimAt: number; lastFinishAt: number }> {
  await waitNoneUnfinished(engine);
  let first = Infinity;
  let last = 0;
  for (const id of ids) {
    const t = await engine.get(id);
    if (t.status !== 'succeeded') throw new Error(`task ${id} ended ${t.status}`);
    const claim = t.history.find((h) => h.type === 'transition' && h.event === 'claim');
    if (claim) first = Math.min(first, claim.at);
    last = Math.max(last, t.finishedAt ?? 0);
  }
  return { spanMs: last - first, firstClaimAt: first, lastFinishAt: last };
}

/**
 * Waits until no task is unfinished: one light query every `pollMs` (50 by default, so that the
 * waiting does not load the database it measures).
 */
export async function waitNoneUnfinished(engine: Engine, pollMs = 50): Promise<void> {
  const deadline = Date.now() + 600_000;
  while ((await engine.list({ status: ['pending', 'running', 'waiting', 'cancelling'], limit: 1 })).tasks.length) {
    if (Date.now() > deadline) throw new Error('tasks did not finish within 10 minutes');
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export interface CpuSample {
  /** Wall-clock time of the sample (ms). */
  at: number;
  /** CPU time used so far (ms, 10 ms resolution) by the given processes. */
  workersMs: number;
  /**
   * Of that, by their main threads (where the JavaScript runs); the rest is V8's background
   * threads (optimising compiles, parallel and concurrent collection) and libuv's pool.
   */
  workersMainMs: number;
  /** CPU time used so far by each PostgreSQL process (backends come and go between samples). */
  postgres: Map<string, number>;
}

/** CPU used so far by `pids` and by each PostgreSQL process (Linux /proc); null where /proc is not there. */
export function cpuSample(pids: readonly number[]): CpuSample | null {
  const ticks = (pid: string, thread = false): { comm: string; ms: number } | null => {
    try {
      const stat = readFileSync(thread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime + stime, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
      return { comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ms: (Number(fields[11]) + Number(fields[12])) * 10 };
    } catch {
      return null;
    }
  };
  let procs: string[];
  try {
    procs = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return null;
  }
  let workersMs = 0;
  let workersMainMs = 0;
  for (const pid of pids) {
    workersMs += ticks(String(pid))?.ms ?? 0;
    workersMainMs += ticks(String(pid), true)?.ms ?? 0;
  }
  const postgres = new Map<string, number>();
  for (const pid of procs) {
    const t = ticks(pid);
    if (t?.comm.startsWith('postgres')) postgres.set(pid, t.ms);
  }
  return { at: Date.now(), workersMs, workersMainMs, postgres };
}

/**
 * PostgreSQL CPU between two samples: the growth of each process seen in both, plus all of each
 * process that started in between (a backend that exited in between is missed, not subtracted).
 */
export function postgresCpuMs(before: CpuSample, after: CpuSample): number {
  let ms = 0;
  for (const [pid, now] of after.postgres) ms += now - (before.postgres.get(pid) ?? 0);
  return ms;
}

/** The CPU a burst used between two samples (null where /proc was not readable). */
export function cpuBetween(before: CpuSample | null, after: CpuSample | null): { wallMs: number; workersMs: number; workersMainMs: number; postgresMs: number } | undefined {
  return before && after
    ? { wallMs: after.at - before.at, workersMs: after.workersMs - before.workersMs, workersMainMs: after.workersMainMs - before.workersMainMs, postgresMs: postgresCpuMs(before, after) }
    : undefined;
}

export type { TaskStatus };

export function fmt(n: number, digits = 1): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
