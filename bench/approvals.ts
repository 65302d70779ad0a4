// `npm run bench`, approvals: (e) many tasks parked on approvals under one worker of concurrency 8
// (all reach `waiting`; the worker process's memory before and after), and (f) the latency from
// `engine.decide()` returning to the next step starting, in one process and, on PostgreSQL, with
// the worker in another process (woken by LISTEN/NOTIFY; it polls only once a minute).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../dist/index.js';
import { approvalThenStep } from './approval-workflows.ts';
import { fmt, percentile, root, stopWorkers, tempDir } from './lib.ts';
import * as postgres from './postgres.ts';

interface Ctx {
  quick: boolean;
  pgUp: boolean;
  line: (s: string) => void;
  results: Record<string, unknown>;
}

const MB = 1024 * 1024;
const mb = (bytes: number): string => `${fmt(bytes / MB, 1)} MB`;

/** The approval task `taskId` asked for, once it exists. */
async function approvalOf(engine: Engine, taskId: string): Promise<string> {
  for (;;) {
    const [a] = await engine.approvals({ taskId, limit: 1 });
    if (a) return a.id;
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function waitingCount(engine: Engine, ids: ReadonlySet<string>): Promise<number> {
  let n = 0;
  for (let cursor: string | undefined; ;) {
    const page = await engine.list({ status: 'waiting', workflow: 'bench-approval', limit: 1000, ...(cursor ? { cursor } : {}) });
    n += page.tasks.filter((t) => ids.has(t.id)).length;
    if (!page.nextCursor) return n;
    cursor = page.nextCursor;
  }
}

/** (e) `n` tasks parked on approvals under one worker of concurrency 8, in this process. */
async function parked(db: string, n: number): Promise<Record<string, number>> {
  const engine = new Engine({ store: db, workflows: [approvalThenStep] });
  await engine.ready();
  const worker = engine.worker({ concurrency: 8, pollIntervalMs: 50 });
  await worker.start();
  const mem = (): { rss: number; heap: number } => {
    (globalThis as { gc?: () => void }).gc?.();
    const m = process.memoryUsage();
    return { rss: m.rss, heap: m.heapUsed };
  };
  const before = mem();
  const t0 = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await engine.start(approvalThenStep)).id);
  const idSet = new Set(ids);
  let waiting = 0;
  while ((waiting = await waitingCount(engine, idSet)) < n) await new Promise((r) => setTimeout(r, 200));
  const seconds = (Date.now() - t0) / 1000;
  const after = mem();
  const inFlight = worker.inFlight;
  await worker.stop();
  await engine.close();
  return { tasks: n, waiting, seconds, inFlight, rssBeforeMB: before.rss / MB, rssAfterMB: after.rss / MB, heapBeforeMB: before.heap / MB, heapAfterMB: after.heap / MB };
}

/** (f) decide() → the next step starting, `samples` times, the worker here or in another process. */
async function decideLatency(db: string, samples: number, otherProcess: boolean): Promise<{ p50Ms: number; p99Ms: number; samples: number }> {
  const engine = new Engine({ store: db, workflows: [approvalThenStep] });
  await engine.ready();
  const child = otherProcess
    ? spawn(process.execPath, [join(root, 'dist/cli/main.js'), 'worker', join(root, 'bench/approval-workflows.ts'), '--db', db, '--quiet', '--poll-ms', '60000'], { stdio: ['ignore', 'ignore', 'inherit'] })
    : null;
  const worker = otherProcess ? null : engine.worker({ concurrency: 8, pollIntervalMs: 60_000 });
  await worker?.start();
  try {
    const lat: number[] = [];
    for (let i = 0; i < samples + 2; i++) {
      const { id } = await engine.start(approvalThenStep);
      const approvalId = await approvalOf(engine, id);
      for (;;) {
        if ((await engine.get(id, { steps: false })).status === 'waiting') break;
        await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise((r) => setTimeout(r, 20)); // the worker is idle again
      await engine.decide(approvalId, { approve: true, by: 'bench' });
      const t0 = Date.now();
      const began = await engine.result<number>(id, { timeout: '60s' });
      if (i >= 2) lat.push(began - t0); // the first two warm up
    }
    return { samples, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
  } finally {
    await worker?.stop();
    if (child) await stopWorkers([child]);
    await engine.close();
  }
}

export async function run(c: Ctx): Promise<void> {
  const n = c.quick ? 1000 : 10_000;
  const samples = c.quick ? 20 : 100;
  c.line(`\n(e) Approvals: ${n.toLocaleString('en')} tasks parked on approvals, one worker of concurrency 8 (in this process)`);
  const park: Record<string, unknown> = {};
  const targets: Array<[string, string]> = [['sqlite', `sqlite:${join(tempDir(), 'approvals.db')}`]];
  if (c.pgUp) targets.push(['postgres', postgres.freshPgUrl('apv')]);
  for (const [name, db] of targets) {
    const p = await parked(db, n);
    park[name] = p;
    c.line(`    ${name.padEnd(10)} ${p.waiting}/${p.tasks} waiting in ${fmt(p.seconds as number, 1)} s, ${p.inFlight} runs in flight after; RSS ${mb((p.rssBeforeMB as number) * MB)} → ${mb((p.rssAfterMB as number) * MB)}, heap ${mb((p.heapBeforeMB as number) * MB)} → ${mb((p.heapAfterMB as number) * MB)}`);
  }
  c.line(`\n(f) Approvals: decide() returned → the next step running, ${samples} samples (p50 / p99)`);
  const lat: Record<string, unknown> = {};
  for (const [name, db] of targets) {
    const l = await decideLatency(db, samples, false);
    lat[`${name} in-process`] = l;
    c.line(`    ${`${name}, worker in this process`.padEnd(42)} p50 ${fmt(l.p50Ms, 0).padStart(4)} ms   p99 ${fmt(l.p99Ms, 0).padStart(4)} ms`);
  }
  if (c.pgUp) {
    const l = await decideLatency(postgres.freshPgUrl('apv_x'), samples, true);
    lat['postgres cross-process'] = l;
    c.line(`    ${'postgres, worker in another process'.padEnd(42)} p50 ${fmt(l.p50Ms, 0).padStart(4)} ms   p99 ${fmt(l.p99Ms, 0).padStart(4)} ms   (target p50 ≤ 25 ms)`);
  }
  c.results.approvals = { parked: park, decideLatency: lat };
}
