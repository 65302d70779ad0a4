// `npm run bench`, (k) rate limits: what a draw costs a step. One task of `steps` sequential steps,
// each plain or each drawing on a named limit too large to bind (10,000,000 requests per second:
// the log holds a second of draws, pruned by the draws themselves), run in alternating rounds on
// one engine and one worker in this process. Per step: the task's time from start to result ÷ its
// steps; the ratio is limited ÷ plain (median over the rounds). A draw is one write transaction of
// its own before the step's attempt (SQLite: BEGIN IMMEDIATE; PostgreSQL: one call of the function
// rate_draw_now, which takes the advisory lock, prunes, sums and inserts).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Engine, workflow } from '../dist/index.js';
import { fmt, median, root, stopWorkers, tempDir, type SectionCtx } from './lib.ts';
import { limitedCall } from './rate-limit-workflows.ts';
import { busiestWindow } from '../test/support/rate-calls.ts';
import * as postgres from './postgres.ts';

export interface RateLimitOverhead {
  store: string;
  steps: number;
  rounds: number;
  plainUsPerStep: number;
  limitedUsPerStep: number;
  ratio: number;
}

const plain = workflow('bench-plain-steps', async (ctx, n: number) => {
  for (let i = 0; i < n; i++) await ctx.step('s', () => i);
  return n;
});

const limited = workflow('bench-limited-steps', async (ctx, n: number) => {
  for (let i = 0; i < n; i++) await ctx.step('s', () => i, { rateLimit: 'bench' });
  return n;
});

async function usPerStep(engine: Engine, wf: string, steps: number): Promise<number> {
  const t0 = performance.now();
  const { id } = await engine.start(wf, steps);
  await engine.result(id, { timeout: '10m' });
  return ((performance.now() - t0) * 1000) / steps;
}

async function measure(url: string, store: string, steps: number, rounds: number): Promise<RateLimitOverhead> {
  const engine = new Engine({ store: url, workflows: [plain, limited], rateLimits: { bench: { requests: 10_000_000, per: '1s' } } });
  try {
    const worker = engine.worker({ pollIntervalMs: 50 });
    await worker.start();
    // A warm-up of each, not counted.
    await usPerStep(engine, 'bench-plain-steps', 50);
    await usPerStep(engine, 'bench-limited-steps', 50);
    const a: number[] = [];
    const b: number[] = [];
    for (let r = 0; r < rounds; r++) {
      a.push(await usPerStep(engine, 'bench-plain-steps', steps));
      b.push(await usPerStep(engine, 'bench-limited-steps', steps));
    }
    await worker.stop();
    const plainUs = median(a);
    const limitedUs = median(b);
    return { store, steps, rounds, plainUsPerStep: plainUs, limitedUsPerStep: limitedUs, ratio: limitedUs / plainUs };
  } finally {
    await engine.close();
  }
}

export interface RateLimitThroughput {
  store: string;
  processes: number;
  rate: number;
  perMs: number;
  calls: number;
  /** The most calls any interval of the limit's length held, by the time each call started. */
  busiestWindow: number;
  /** Calls per window over the run, as a share of the limit. */
  share: number;
  /** The calls in each whole window from the first call on (the last, partial one left out), as shares of the limit. */
  windows: number[];
}

/** The calls started in each whole window of `perMs` from the first call on, as shares of `rate`. */
export function wholeWindows(started: readonly number[], perMs: number, rate: number): number[] {
  const first = Math.min(...started);
  const whole = Math.floor((Math.max(...started) - first) / perMs);
  const counts = Array.from({ length: whole }, () => 0);
  for (const t of started) {
    const k = Math.floor((t - first) / perMs);
    if (k < whole) counts[k] = (counts[k] as number) + 1;
  }
  return counts.map((n) => n / rate);
}

/**
 * `processes` worker processes (`stepwise worker`) share a limit of `rate` calls per `perMs`
 * through the store; `calls` tasks of one limited step each, started at once after a warm-up on a
 * key of its own. Share: the calls ÷ (the limit × the windows the run took, from the first call to
 * the last plus one window); and the share of each whole window from the first call.
 */
async function acrossProcesses(url: string, store: string, processes: number, rate: number, perMs: number, calls: number): Promise<RateLimitThroughput> {
  const per = `${perMs}ms`;
  const env = { ...process.env, BENCH_RATE: String(rate), BENCH_PER: per };
  const engine = new Engine({ store: url, workflows: [limitedCall], rateLimits: { 'bench-api': { requests: rate, per } } });
  const children: ChildProcess[] = [];
  try {
    await engine.ready();
    for (let i = 0; i < processes; i++) {
      const args = [join(root, 'dist/cli/main.js'), 'worker', join(root, 'bench/rate-limit-workflows.ts'), '--db', url, '--quiet', '--poll-ms', '20', '--concurrency', '16'];
      children.push(spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'], env }));
    }
    const run = async (key: string, n: number): Promise<Array<{ calledAt: number }>> => {
      const handles = await engine.startMany(Array.from({ length: n }, () => ({ workflow: limitedCall, input: { key } })));
      return Promise.all(handles.map((h) => engine.result(h.id, { timeout: '15m' }) as Promise<{ calledAt: number }>));
    };
    await run('warm-up', Math.min(rate, 20));
    const outs = await run('measured', calls);
    const started = outs.map((o) => o.calledAt);
    const span = Math.max(...started) - Math.min(...started);
    return {
      store,
      processes,
      rate,
      perMs,
      calls,
      busiestWindow: busiestWindow(started, perMs),
      share: calls / (rate * ((span + perMs) / perMs)),
      windows: wholeWindows(started, perMs, rate),
    };
  } finally {
    await stopWorkers(children);
    await engine.close();
  }
}

export async function report(c: SectionCtx): Promise<void> {
  const steps = c.quick ? 200 : 1000;
  const rounds = c.quick ? 3 : 5;
  c.line(`\n(k) Rate limits: a step that draws on a named limit (never binding) vs a plain step; one task of ${steps} steps, ${rounds} rounds each, alternating.`);
  const figures: RateLimitOverhead[] = [await measure(`sqlite:${join(tempDir(), 'rate.db')}`, 'sqlite', steps, rounds)];
  if (c.pgUp) figures.push(await measure(postgres.freshPgUrl('rate'), 'postgres', steps, rounds));
  for (const f of figures) {
    c.line(`    ${f.store.padEnd(9)} plain ${fmt(f.plainUsPerStep, 0).padStart(5)} µs/step | with a draw ${fmt(f.limitedUsPerStep, 0).padStart(5)} µs/step | ratio ${fmt(f.ratio, 2)}×`);
  }
  c.results.rateLimits = figures;
  const rate = 20;
  const calls = c.quick ? 100 : 240;
  c.line(
    `    A binding limit (${rate} calls a second) shared by 4 worker processes: ${calls} tasks of one limited step, started at once; the most calls any second held (by their start), and the calls per second over the run as a share of the limit:`,
  );
  const shared: RateLimitThroughput[] = [await acrossProcesses(`sqlite:${join(tempDir(), 'rate-shared.db')}`, 'sqlite', 4, rate, 1000, calls)];
  if (c.pgUp) shared.push(await acrossProcesses(postgres.freshPgUrl('rateshared'), 'postgres', 4, rate, 1000, calls));
  for (const f of shared) {
    c.line(`    ${f.store.padEnd(9)} busiest second ${f.busiestWindow} of ${f.rate} | throughput ${fmt(f.share * 100, 1)}% of the limit`);
  }
  if (!c.quick) {
    // The issue's case: a limit of N calls a minute, with three minutes of calls queued at once.
    const perMinute = 300;
    const queued = 3 * perMinute;
    c.line(
      `    A limit of ${perMinute} calls a minute shared by 4 worker processes: ${queued} tasks of one limited step, started at once; the most calls any minute held, the calls per minute over the run as a share of the limit, and each whole minute's calls from the first call on:`,
    );
    const minutes: RateLimitThroughput[] = [await acrossProcesses(`sqlite:${join(tempDir(), 'rate-minute.db')}`, 'sqlite', 4, perMinute, 60_000, queued)];
    if (c.pgUp) minutes.push(await acrossProcesses(postgres.freshPgUrl('rateminute'), 'postgres', 4, perMinute, 60_000, queued));
    for (const f of minutes) {
      c.line(
        `    ${f.store.padEnd(9)} busiest minute ${f.busiestWindow} of ${f.rate} | throughput ${fmt(f.share * 100, 1)}% of the limit | whole minutes ${f.windows.map((w) => `${fmt(w * 100, 1)}%`).join(', ')}`,
      );
    }
    shared.push(...minutes);
  }
  c.results.rateLimitThroughput = shared;
}
