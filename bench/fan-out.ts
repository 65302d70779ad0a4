// `npm run bench`, (m) fan-out (issue 30): a parent that fans out to 1,000 children of one no-op
// step (`ctx.children`, starts written together) and returns when the last has ended, on
// PostgreSQL. Timed from the call that starts the parent to its result; and the parent's wake-up:
// from the last child's step (the latest time a child's step ran, which the parent returns) to the
// result in the caller's hands. Stepwise with its workers in this process, and with 2 worker
// processes (the caller's engine runs none); beside it, DBOS Transact doing the same with child
// workflows (`DBOS.startWorkflow` inside the parent, all awaited; one process, as DBOS runs a
// started workflow where it is started). Each: a warm-up parent of 50, then the median of 3. With
// STEPWISE_BENCH_BASE, that build's 2-process figure too, its parents alternating with this build's.
import { join } from 'node:path';
import { fmt, root, spawnWorker, stopWorkers, type SectionCtx } from './lib.ts';
import { api } from './end-to-end.ts';
import * as postgres from './postgres.ts';

export interface FanOut {
  system: string;
  children: number;
  totalMs: number;
  wakeMs: number;
}

const CONCURRENCY = 50;

type Once = (n: number) => Promise<{ totalMs: number; wakeMs: number }>;

/** A warm setup of the build at `dir` (its engine, and its workers here or in 2 processes): one parent at a time, then `stop`. */
async function setUp(dir: string, processes: 0 | 2): Promise<{ once: Once; stop: () => Promise<void> }> {
  // The build's own API and workflows (the worker processes load the same definitions).
  const { Engine } = await api(dir);
  const { fanLeaf, fanParent } = (await import(join(dir, 'bench/workflows.ts'))) as typeof import('./workflows.ts');
  const url = postgres.freshPgUrl('fanout');
  const engine = new Engine({ store: url, workflows: [fanParent, fanLeaf] });
  await engine.ready();
  const worker = processes === 0 ? engine.worker({ concurrency: CONCURRENCY }) : null;
  await worker?.start();
  const spawned = processes === 0 ? [] : Array.from({ length: processes }, () => spawnWorker(url, ['--concurrency', String(CONCURRENCY)], {}, dir));
  const once: Once = async (n) => {
    const t0 = performance.now();
    const { id } = await engine.start(fanParent, { n });
    const latest = (await engine.result(id, { timeout: '300s' })) as number;
    const end = Date.now();
    return { totalMs: performance.now() - t0, wakeMs: end - latest };
  };
  await once(50);
  const stop = async (): Promise<void> => {
    await worker?.stop();
    await stopWorkers(spawned);
    await engine.close();
  };
  return { once, stop };
}

/** The median of 3 parents of `children` (by their total), per build: this build's, and with `base` that one's, alternating. */
async function measure(label: string, children: number, processes: 0 | 2, base?: string): Promise<FanOut[]> {
  const builds = [{ label, setup: await setUp(root, processes), runs: [] as Array<{ totalMs: number; wakeMs: number }> }];
  if (base) builds.push({ label: `${label} (base)`, setup: await setUp(base, processes), runs: [] });
  try {
    for (let r = 0; r < 3; r++) for (const b of r % 2 ? [...builds].reverse() : builds) b.runs.push(await b.setup.once(children));
  } finally {
    for (const b of builds) await b.setup.stop();
  }
  return builds.map((b) => ({ system: b.label, children, ...(b.runs.sort((x, y) => x.totalMs - y.totalMs)[1] as { totalMs: number; wakeMs: number }) }));
}

export async function report(ctx: SectionCtx): Promise<void> {
  if (!ctx.pgUp) {
    ctx.line('\n(m) Fan-out: skipped (no PostgreSQL)');
    return;
  }
  const children = ctx.quick ? 200 : 1000;
  ctx.line(`\n(m) Fan-out on PostgreSQL: a parent to ${children} children of one no-op step; parent start → result, and last child's step → result`);
  ctx.line('    (median of 3 after a warm-up of 50).');
  const figures: FanOut[] = [
    ...(await measure('Stepwise, workers in this process', children, 0)),
    ...(await measure('Stepwise, 2 worker processes', children, 2, process.env.STEPWISE_BENCH_BASE)),
  ];
  const peer = postgres.runDbos<FanOut & { version: string }>('dbos-fanout.mjs', [String(children)]);
  if ('error' in peer) ctx.line(`    DBOS: ${peer.error}`);
  else figures.push({ system: `DBOS Transact ${peer.version}, one process`, children, totalMs: peer.totalMs, wakeMs: peer.wakeMs });
  const dbos = figures.find((f) => f.system.startsWith('DBOS'));
  for (const f of figures) {
    // Both Stepwise lines beside the one DBOS figure: DBOS runs a child workflow in the process that
    // starts it, so its one-process run is the only shape it has; the setup is 2 worker processes.
    const vs = dbos && f !== dbos ? `   ${fmt(dbos.totalMs / f.totalMs, 1)}× DBOS` : '';
    ctx.line(`    ${f.system.padEnd(38)} ${fmt(f.totalMs, 0).padStart(6)} ms   wake-up ${fmt(f.wakeMs, 0).padStart(4)} ms${vs}`);
  }
  ctx.results.fanOut = figures;
}
