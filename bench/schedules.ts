// `npm run bench`, (j) schedules: from a tick's time to its task's start and to its first step
// running, with a schedule firing every second and a worker in the same process that scans for due
// ticks every `scheduleScanMs` and wakes at the next tick it knows of. The tick's time is the
// cron's (ctx.scheduledAt); "task created" is the task row's createdAt, "first step" the step's
// startedAt, both on the engine's clock.
import { join } from 'node:path';
import { Engine, workflow } from '../dist/index.js';
import { fmt, percentile, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

export interface ScheduleLatency {
  store: string;
  scanMs: number;
  ticks: number;
  createdP50Ms: number;
  createdP99Ms: number;
  stepP50Ms: number;
  stepP99Ms: number;
}

const tick = workflow('bench-tick', async (ctx) => ctx.step('first', () => ctx.scheduledAt?.getTime() ?? null));

async function measure(url: string, store: string, scanMs: number, ticks: number): Promise<ScheduleLatency> {
  const engine = new Engine({ store: url, workflows: [tick] });
  try {
    const worker = engine.worker({ scheduleScanMs: scanMs, pollIntervalMs: 50 });
    await worker.start();
    await engine.schedules.create({ id: 'bench', workflow: 'bench-tick', cron: '* * * * * *', overlap: 'allow', catchup: '1m' });
    const created: number[] = [];
    const stepped: number[] = [];
    const seen = new Set<string>();
    while (created.length < ticks) {
      await new Promise((r) => setTimeout(r, 200));
      for (const t of (await engine.list({ workflow: 'bench-tick', limit: 1000 })).tasks) {
        if (seen.has(t.id) || t.status !== 'succeeded') continue;
        seen.add(t.id);
        const info = await engine.get(t.id);
        const at = Number(/:(\d+)$/.exec(info.idempotencyKey ?? '')?.[1]);
        created.push(info.createdAt - at);
        stepped.push((info.steps[0]?.startedAt ?? info.createdAt) - at);
      }
    }
    await worker.stop();
    return {
      store,
      scanMs,
      ticks: created.length,
      createdP50Ms: percentile(created, 50),
      createdP99Ms: percentile(created, 99),
      stepP50Ms: percentile(stepped, 50),
      stepP99Ms: percentile(stepped, 99),
    };
  } finally {
    await engine.close();
  }
}

export async function report(c: SectionCtx): Promise<void> {
  const ticks = c.quick ? 8 : 30;
  c.line(`\n(j) Schedules: a tick's time → its task created / its first step running; a schedule every second, ${ticks} ticks,`);
  c.line('    worker in the same process scanning every scheduleScanMs and waking at the next tick it knows of.');
  const figures: ScheduleLatency[] = [];
  for (const scanMs of [1000, 100]) {
    figures.push(await measure(`sqlite:${join(tempDir(), 'sched.db')}`, 'sqlite', scanMs, ticks));
    if (c.pgUp) figures.push(await measure(postgres.freshPgUrl(`sched${scanMs}`), 'postgres', scanMs, ticks));
  }
  for (const f of figures) {
    c.line(
      `    ${f.store.padEnd(9)} scan ${String(f.scanMs).padStart(4)} ms: created p50 ${fmt(f.createdP50Ms, 0).padStart(4)} ms p99 ${fmt(f.createdP99Ms, 0).padStart(4)} ms | first step p50 ${fmt(f.stepP50Ms, 0).padStart(4)} ms p99 ${fmt(f.stepP99Ms, 0).padStart(4)} ms (${f.ticks} ticks)`,
    );
  }
  c.results.schedules = figures;
}

export async function only(c: SectionCtx): Promise<void> {
  await report(c);
}
