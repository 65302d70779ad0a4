// (alloc) What the worker's JavaScript allocates and how many promises it creates per task: counts,
// not times, so they are the same on a busy machine as on a quiet one. Garbage collection takes a
// fifth to a third of a worker's CPU in the drain (see docs/benchmarks.md), and what a task
// allocates is what the collector has to sweep up. Measured in a process of its own
// (bench/allocation-probe.ts), for this build and, with STEPWISE_BENCH_BASE, the base build.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fmt, median, root, tempDir, type SectionCtx } from './lib.ts';
import { freshPgUrl } from './postgres.ts';

export interface Allocation {
  build: string;
  store: string;
  steps: number;
  kbPerTask: number;
  promisesPerTask: number;
  /** What a run holds while in flight (inside its last step; tasks of one step or more), KB. */
  kbHeldPerRun?: number;
}

const V8_FLAGS = ['--expose-gc', '--min-semi-space-size=256', '--max-semi-space-size=256'];

function probe(build: string, store: string, tasks: number, steps: number): { bytes: number[]; promises: number[]; disturbed: number; held: number[] } {
  const r = spawnSync(process.execPath, [...V8_FLAGS, '--import', 'tsx', join(root, 'bench/allocation-probe.ts'), build, store, String(tasks), String(steps)], {
    cwd: root,
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`allocation probe failed (${r.status}): ${r.stderr.slice(-2000)}`);
  const last = r.stdout.trim().split('\n').pop() as string;
  return JSON.parse(last) as { bytes: number[]; promises: number[]; disturbed: number; held: number[] };
}

export async function report({ pgUp, line, results }: SectionCtx): Promise<void> {
  const base = process.env.STEPWISE_BENCH_BASE;
  const builds: Array<[string, string]> = [[root, 'this build'], ...(base ? [[base, 'base'] as [string, string]] : [])];
  line('\n(alloc) Allocation per task: bursts of 300 tasks of 0, 1 and 3 no-op steps, engine and worker (concurrency 256)');
  line('    in one process whose young generation is big enough that no collection runs in a burst: the heap');
  line('    grown over a burst is what it allocated (median of 5 bursts after 3 warm-up ones); promises counted');
  line('    by a promise hook in 3 more bursts; and what a run holds in flight: the heap after a full collection');
  line('    with 256 runs inside their last step, less the heap once they ended and the worker stopped (median of 3). A');
  line('    young collection copies what the runs in flight hold. Counts, not times: a busy machine does not move them.');
  const out: Allocation[] = [];
  const stores: Array<[string, () => string]> = [['sqlite', () => `sqlite:${join(tempDir(), `alloc-${out.length}.db`)}`]];
  if (pgUp) stores.push(['postgres', () => freshPgUrl(`alloc${out.length}`)]);
  for (const [store, url] of stores) {
    for (const steps of [0, 1, 3]) {
      for (const [dir, label] of builds) {
        const p = probe(dir, url(), 300, steps);
        if (!p.bytes.length) throw new Error(`allocation probe: a collection ran in every burst (${store}, ${steps} steps): the figure would be wrong`);
        const a: Allocation = { build: label, store, steps, kbPerTask: median(p.bytes) / 1024, promisesPerTask: median(p.promises) };
        if (p.held.length) a.kbHeldPerRun = median(p.held) / 1024;
        out.push(a);
        line(
          `    ${label.padEnd(10)} ${store.padEnd(8)} ${steps} step${steps === 1 ? ' ' : 's'}: ${fmt(a.kbPerTask, 1).padStart(6)} KB and ${fmt(a.promisesPerTask, 1).padStart(6)} promises per task${a.kbHeldPerRun === undefined ? '' : `; ${fmt(a.kbHeldPerRun, 1)} KB held per run in flight`}`,
        );
      }
    }
  }
  results.allocation = out;
}
