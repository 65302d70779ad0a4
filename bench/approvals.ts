// `npm run bench`, approvals: (e) many tasks parked on approvals under one worker of concurrency 8
// (all reach `waiting`; the worker's memory after a full GC, after a warm-up, half way and with
// all parked: the method of scale.ts (h)), and (f) the latency from
// `engine.decide()` returning to the next step starting, in one process and, on PostgreSQL, with
// the worker in another process (woken by LISTEN/NOTIFY; it polls only once a minute).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../dist/index.js';
import { approvalThenStep } from './approval-workflows.ts';
import { fmt, percentile, root, stopWorkers, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { parkedMemory, type ParkedMemory } from './scale.ts';

/** The approval task `taskId` asked for, once it exists. */
async function approvalOf(engine: Engine, taskId: string): Promise<string> {
  for (;;) {
    const [a] = await engine.approvals({ taskId, limit: 1 });
    if (a) return a.id;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** (f) decide() → the next step starting, `samples` times, the worker here or in another process. */
async function decideLatency(db: string, samples: number, otherProcess: boolean): Promise<{ p50Ms: number; p99Ms: number; samples: number }> {
  const engine = new Engine({ store: db, workflows: [approvalThenStep] });
  await engine.ready();
  const child = otherProcess
    ? spawn(process.execPath, [join(root, 'dist/cli/main.js'), 'worker', join(root, 'bench/approval-workflows.ts'), '--db', db, '--quiet', '--poll-ms', '60000'], {
        stdio: ['ignore', 'ignore', 'inherit'],
      })
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

export async function run(c: SectionCtx): Promise<void> {
  const n = c.quick ? 1000 : 10_000;
  const samples = c.quick ? 20 : 100;
  c.line(`\n(f1) Approvals: ${n.toLocaleString('en')} tasks parked on approvals, one worker of concurrency 8 in this process (tasks`);
  c.line('    started by a second engine; heap used and RSS after a full GC, after 1,000 warm-up tasks, half way, and with all parked)');
  const park: Record<string, ParkedMemory> = {};
  const targets: Array<[string, string]> = [['sqlite', `sqlite:${join(tempDir(), 'approvals.db')}`]];
  if (c.pgUp) targets.push(['postgres', postgres.freshPgUrl('apv')]);
  for (const [name, db] of targets) park[name] = await parkedMemory(db, name, n, c.line, { parks: approvalThenStep, concurrency: 8 });
  c.line(`\n(f2) Approvals: decide() returned → the next step running, ${samples} samples (p50 / p99)`);
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

// `node --import tsx bench/approvals.ts [--quick]` runs this part alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const results: Record<string, unknown> = {};
  await run({ quick: process.argv.includes('--quick'), pgUp: await postgres.pgAvailable(), line: (s) => console.log(s), results });
  await postgres.cleanup();
}
