// Cancel latency: from `engine.cancel()` to the running step's AbortSignal firing, and to the task
// reaching `cancelled`, p50/p99; a worker in the same process (SQLite, PostgreSQL) and in another
// process (PostgreSQL: the cancel travels by NOTIFY). The step honours its signal at once.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../dist/index.js';
import { fmt, percentile, spawnWorker, stopWorkers, tempDir } from './lib.ts';
import { PG_URL, freshPgUrl, pgAvailable } from './postgres.ts';
import { cancellable } from './workflows.ts';

export interface CancelLatency {
  setup: string;
  samples: number;
  signalP50Ms: number;
  signalP99Ms: number;
  cancelledP50Ms: number;
  cancelledP99Ms: number;
}

const now = (): number => performance.timeOrigin + performance.now();

/** The time the log says `what` happened to task `id`, waiting for it to be written. */
async function logged(log: string, what: 'started' | 'aborted', id: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const line = readFileSync(log, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${what} ${id} `));
    if (line) return Number(line.split(' ')[2]);
    if (Date.now() > deadline) throw new Error(`task ${id}: no "${what}" within 30 s`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function measure(setup: string, db: string, samples: number, inProcess: boolean): Promise<CancelLatency> {
  const log = join(tempDir('stepwise-bench-cancel-'), 'log');
  writeFileSync(log, '');
  const engine = new Engine({ store: db, workflows: [cancellable] });
  await engine.ready();
  const worker = inProcess ? engine.worker({ pollIntervalMs: 50 }) : null;
  await worker?.start();
  const child = inProcess ? null : spawnWorker(db);
  const toSignal: number[] = [];
  const toCancelled: number[] = [];
  try {
    for (let i = -2; i < samples; i++) {
      const { id } = await engine.start(cancellable, { log });
      await logged(log, 'started', id);
      const t0 = now();
      await engine.cancel(id);
      await engine.result(id, { timeout: '30s' }).catch(() => undefined);
      const done = now();
      const aborted = await logged(log, 'aborted', id);
      if (i < 0) continue; // warm-up
      toSignal.push(aborted - t0);
      toCancelled.push(done - t0);
    }
  } finally {
    await worker?.stop();
    if (child) await stopWorkers([child]);
    await engine.close();
  }
  return {
    setup,
    samples,
    signalP50Ms: percentile(toSignal, 50),
    signalP99Ms: percentile(toSignal, 99),
    cancelledP50Ms: percentile(toCancelled, 50),
    cancelledP99Ms: percentile(toCancelled, 99),
  };
}

/** Runs every setup and prints one line each; returns the figures for results.json. */
export async function cancelLatency(quick: boolean, line: (s: string) => void): Promise<CancelLatency[]> {
  line("\n(e) Cancel latency: cancel() → the running step's AbortSignal fires, and → the task is cancelled (result() settles)");
  const samples = quick ? 20 : 100;
  const out: CancelLatency[] = [];
  out.push(await measure('sqlite, worker in this process', `sqlite:${join(tempDir(), 'cancel.db')}`, samples, true));
  if (await pgAvailable()) {
    out.push(await measure('postgres, worker in this process', freshPgUrl('cancel_in'), samples, true));
    out.push(await measure('postgres, worker in another process', freshPgUrl('cancel_x'), samples, false));
  } else {
    line(`    PostgreSQL: not reachable at ${PG_URL}; skipped.`);
  }
  for (const c of out) {
    line(
      `    ${c.setup.padEnd(38)} signal p50 ${fmt(c.signalP50Ms, 1).padStart(6)} ms p99 ${fmt(c.signalP99Ms, 1).padStart(6)} ms | cancelled p50 ${fmt(c.cancelledP50Ms, 1).padStart(6)} ms p99 ${fmt(c.cancelledP99Ms, 1).padStart(6)} ms  (${c.samples} samples)`,
    );
  }
  return out;
}

// `node --import tsx bench/cancel.ts [--quick]` runs this part alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  await cancelLatency(process.argv.includes('--quick'), (s) => console.log(s));
  const { cleanup } = await import('./postgres.ts');
  await cleanup();
}
