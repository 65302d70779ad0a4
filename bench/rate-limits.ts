// `npm run bench`, (k) rate limits: what a draw costs a step. One task of `steps` sequential steps,
// each plain or each drawing on a named limit too large to bind (10,000,000 requests per second:
// the log holds a second of draws, pruned by the draws themselves), run in alternating rounds on
// one engine and one worker in this process. Per step: the task's time from start to result ÷ its
// steps; the ratio is limited ÷ plain (median over the rounds). A draw is one write transaction of
// its own before the step's attempt (SQLite: BEGIN IMMEDIATE; PostgreSQL: one call of the function
// rate_draw_now, which takes the advisory lock, prunes, sums and inserts).
import { join } from 'node:path';
import { Engine, workflow } from '../dist/index.js';
import { fmt, median, tempDir } from './lib.ts';
import * as postgres from './postgres.ts';

interface Ctx {
  quick: boolean;
  pgUp: boolean;
  line: (s: string) => void;
  results: Record<string, unknown>;
}

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

export async function report(c: Ctx): Promise<void> {
  const steps = c.quick ? 200 : 1000;
  const rounds = c.quick ? 3 : 5;
  c.line(`\n(k) Rate limits: a step that draws on a named limit (never binding) vs a plain step; one task of ${steps} steps, ${rounds} rounds each, alternating.`);
  const figures: RateLimitOverhead[] = [await measure(`sqlite:${join(tempDir(), 'rate.db')}`, 'sqlite', steps, rounds)];
  if (c.pgUp) figures.push(await measure(postgres.freshPgUrl('rate'), 'postgres', steps, rounds));
  for (const f of figures) {
    c.line(`    ${f.store.padEnd(9)} plain ${fmt(f.plainUsPerStep, 0).padStart(5)} µs/step | with a draw ${fmt(f.limitedUsPerStep, 0).padStart(5)} µs/step | ratio ${fmt(f.ratio, 2)}×`);
  }
  c.results.rateLimits = figures;
}
