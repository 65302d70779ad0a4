// (jit) The optimising compiles a burst of tasks costs after a quiet spell. V8 keeps a function's
// optimised code only while what it was specialised for is alive: the hidden classes of the objects
// it handled, and for a closure the closures of its kind. When a worker has been idle long enough for
// a full collection, all of a burst's objects are gone, and the next burst compiles again, on V8's
// background threads, which on a small machine take CPU from the worker's thread and the database.
// Counted in a process of its own (bench/recompile-probe.ts, started with --trace-opt), for this
// build and, with STEPWISE_BENCH_BASE, the base build; and once with one long task in flight
// throughout, as a worker that is never fully idle has.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fmt, median, root, type SectionCtx } from './lib.ts';
import { freshPgUrl } from './postgres.ts';

export interface Recompiles {
  build: string;
  keep: boolean;
  compilesPerBurst: number;
  /** Milliseconds of background compiling per burst, as V8 reports them (a time: the machine moves it). */
  compileMsPerBurst: number;
}

const TASKS = 500;
const BURSTS = 12;
/** Bursts before this one are the warm-up: V8 optimises the whole path only after thousands of steps. */
const FIRST_COUNTED = 4;

/** Per counted burst: optimising compiles and their background milliseconds (the middle of V8's three phases). */
function count(stdout: string): { compiles: number[]; ms: number[] } {
  const compiles: number[] = [];
  const ms: number[] = [];
  let burst = -1;
  for (const text of stdout.split('\n')) {
    const marker = /^BURST (\d+) (start|end)$/.exec(text);
    if (marker) {
      burst = marker[2] === 'start' ? Number(marker[1]) : -1;
      if (burst >= FIRST_COUNTED) {
        compiles.push(0);
        ms.push(0);
      }
      continue;
    }
    if (burst < FIRST_COUNTED) continue;
    const took = /^\[completed compiling .* took ([\d.]+), ([\d.]+), ([\d.]+) ms\]$/.exec(text);
    if (!took) continue;
    compiles[compiles.length - 1]! += 1;
    ms[ms.length - 1]! += Number(took[2]);
  }
  return { compiles, ms };
}

function probe(build: string, store: string, keep: boolean): { compiles: number[]; ms: number[] } {
  const r = spawnSync(
    process.execPath,
    ['--trace-opt', '--expose-gc', '--import', 'tsx', join(root, 'bench/recompile-probe.ts'), build, store, String(TASKS), '3', String(BURSTS), keep ? '1' : '0'],
    { cwd: root, encoding: 'utf8', timeout: 600_000, maxBuffer: 256 * 1024 * 1024 },
  );
  if (r.status !== 0) throw new Error(`recompile probe failed (${r.status}): ${r.stderr.slice(-2000)}`);
  const counted = count(r.stdout);
  if (counted.compiles.length !== BURSTS - FIRST_COUNTED) throw new Error(`recompile probe: ${counted.compiles.length} bursts counted, expected ${BURSTS - FIRST_COUNTED}`);
  return counted;
}

export async function report({ pgUp, line, results }: SectionCtx): Promise<void> {
  line(`\n(jit) Optimising compiles per burst after a quiet spell: bursts of ${TASKS} tasks × 3 no-op steps due together, engine and`);
  line('    worker (concurrency 256) in one process on PostgreSQL, a full collection between bursts (as an idle process gets);');
  line(`    median over bursts ${FIRST_COUNTED + 1}–${BURSTS} of the compiles V8 reports (--trace-opt) and of their background milliseconds.`);
  if (!pgUp) {
    line('    PostgreSQL: not reachable; skipped.');
    return;
  }
  const base = process.env.STEPWISE_BENCH_BASE;
  const runs: Array<[string, string, boolean]> = [[root, 'this build', false], ...(base ? [[base, 'base', false] as [string, string, boolean]] : []), [root, 'this build', true]];
  const out: Recompiles[] = [];
  for (const [dir, label, keep] of runs) {
    const { compiles, ms } = probe(dir, freshPgUrl(`jit${out.length}`), keep);
    const r: Recompiles = { build: label, keep, compilesPerBurst: median(compiles), compileMsPerBurst: median(ms) };
    out.push(r);
    line(
      `    ${label.padEnd(10)} ${keep ? 'one long task in flight throughout' : 'idle between bursts              '}: ${fmt(r.compilesPerBurst, 0).padStart(4)} compiles, ${fmt(r.compileMsPerBurst, 0).padStart(4)} ms of compiling per burst`,
    );
  }
  results.recompiles = out;
}
