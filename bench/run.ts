// `npm run bench`: every figure is measured side by side in this one run, on this machine, on the
// built package (dist/), as users run it.
// Results are printed and written to .bench/results.json. `--quick`: one round, fewer samples.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { WARM_UP_BURSTS, fmt, root, tempDir, type SectionCtx } from './lib.ts';
import { E2E_CONCURRENCY, endToEnd, type EndToEnd } from './end-to-end.ts';
import * as sqlite from './sqlite.ts';
import * as postgres from './postgres.ts';

const quick = process.argv.includes('--quick');
// `--core-only`: sections (a)–(c) alone, the ones every earlier build's bench also has, so two builds
// can be compared section for section.
const coreOnly = process.argv.includes('--core-only');
const rounds = quick ? 1 : 5;
const results: Record<string, unknown> = { machine: `${process.version} on ${process.platform}/${process.arch}`, at: new Date().toISOString() };
const line = (s: string): void => console.log(s);
const cores = cpus().length;
/** "CPU: workers 290 ms (main threads 180 ms) + PostgreSQL 90 ms in 400 ms (2 cores: 48% busy)". */
const cpuNote = (t: sqlite.Throughput): string => {
  if (!t.cpu) return '';
  const { wallMs, workersMs, workersMainMs, postgresMs } = t.cpu;
  const busy = Math.round((100 * (workersMs + postgresMs)) / (wallMs * cores));
  return `  CPU: worker${t.workers > 1 ? 's' : ''} ${fmt(workersMs, 0)} ms (main thread${t.workers > 1 ? 's' : ''} ${fmt(workersMainMs, 0)} ms)${postgresMs ? ` + PostgreSQL ${fmt(postgresMs, 0)} ms` : ''} in ${fmt(wallMs, 0)} ms (${cores} cores ${busy}% busy)`;
};

/** "  (rounds 1.08–1.21×)": the spread of the rounds' journal-row ratios. */
const spread = (o: { roundRatios: number[] }): string => (o.roundRatios.length > 1 ? `  (rounds ${fmt(Math.min(...o.roundRatios), 2)}–${fmt(Math.max(...o.roundRatios), 2)}×)` : '');

line(`Stepwise benchmark (${results.machine as string})${quick ? ' — quick mode' : ''}`);
if (process.argv.includes('--scale-only')) await (await import('./scale.ts')).only({ quick, pgUp: await postgres.pgAvailable(), line, results });
/** `--<name>-only`: these sections alone, in order (each module's `report`). */
const ALONE: Record<string, readonly string[]> = {
  headline: ['headline'],
  'drain-long': ['long-drain'],
  alloc: ['allocation'],
  jit: ['recompiles'],
  schedules: ['schedules'],
  flow: ['flow-control'],
  'rate-limits': ['rate-limits'],
  'stream-close': ['stream-close'],
  streams: ['streams'],
  'fan-out': ['fan-out'],
  chat: ['chat-turns'],
  fork: ['fork'],
  search: ['search', 'fork'],
  payloads: ['payloads'],
  retention: ['retention'],
};
for (const [flag, sections] of Object.entries(ALONE)) {
  if (!process.argv.includes(`--${flag}-only`)) continue;
  const pgUp = await postgres.pgAvailable();
  for (const section of sections) await ((await import(`./${section}.ts`)) as { report: (ctx: SectionCtx) => Promise<void> }).report({ quick, pgUp, line, results });
  if (pgUp) await postgres.cleanup();
  mkdirSync(join(root, '.bench'), { recursive: true });
  writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.exit(0);
}

// The headline table first (the top of docs/benchmarks.md), then (e2e): the figure a user sees.
const pgUpFirst = await postgres.pgAvailable();
if (!coreOnly && !process.argv.includes('--e2e-only')) {
  await (await import('./headline.ts')).report({ quick, pgUp: pgUpFirst, line, results });
  await (await import('./allocation.ts')).report({ quick, pgUp: pgUpFirst, line, results });
  await (await import('./recompiles.ts')).report({ quick, pgUp: pgUpFirst, line, results });
}
async function endToEndSection(): Promise<void> {
  const base = process.env.STEPWISE_BENCH_BASE;
  line('\n(e2e) End to end: 500 tasks × 3 no-op steps submitted by one process (500 concurrent start() calls, or one');
  line('    startMany), timed from the first call to the last result() resolved; warm engine and worker(s), two warm-up');
  line(`    batches, median of ${quick ? 1 : 3} measured batches. Worker in the submitting process, or in 1 / 2 / 4 worker processes,`);
  line(`    each at concurrency ${E2E_CONCURRENCY} (the whole burst at once, as DBOS runs its 500 workflows).`);
  if (base) line(`    Beside it, the same for the build in ${base} (STEPWISE_BENCH_BASE), in the same run, interleaved.`);
  const e2e: EndToEnd[] = [];
  const builds: Array<[string, string]> = [[root, 'this build'], ...(base ? [[base, 'base'] as [string, string]] : [])];
  const e2eLine = (x: EndToEnd): string =>
    `    ${x.build.padEnd(10)} ${x.store.padEnd(10)} ${x.submit.padEnd(9)} ${x.workerProcesses ? `${x.workerProcesses} worker process${x.workerProcesses > 1 ? 'es' : ''}` : 'in-process worker'}: ${fmt(x.stepsPerSec, 0).padStart(7)} steps/s (${fmt(x.seconds, 2)} s)`;
  for (const [dir, label] of builds) {
    const baseBuild = label === 'base';
    for (const submit of baseBuild ? (['start'] as const) : (['start', 'startMany'] as const)) {
      const x = await endToEnd(dir, label, `sqlite:${join(tempDir(), 'e2e.db')}`, 'sqlite', submit, 0, 500, quick ? 1 : 3);
      e2e.push(x);
      line(e2eLine(x));
    }
  }
  if (pgUpFirst) {
    for (const workers of [0, 1, 2, 4]) {
      for (const [dir, label] of builds) {
        const baseBuild = label === 'base';
        for (const submit of baseBuild ? (['start'] as const) : (['start', 'startMany'] as const)) {
          const x = await endToEnd(dir, label, postgres.freshPgUrl(`e2e${workers}`), 'postgres', submit, workers, 500, quick ? 1 : 3);
          e2e.push(x);
          line(e2eLine(x));
        }
      }
      // DBOS right after the figures it is compared with (one process, the worker in it), so that
      // a machine whose load changes from minute to minute weighs on both alike.
      if (workers === 0) {
        const d = postgres.dbos(500, 1000);
        if ('error' in d) line(`    DBOS Transact: failed to run (${d.error})`);
        else {
          results.dbosEndToEnd = d;
          const ours = e2e.find((x) => x.build === 'this build' && x.store === 'postgres' && x.submit === 'start' && x.workerProcesses === 0) as EndToEnd;
          const many = e2e.find((x) => x.build === 'this build' && x.store === 'postgres' && x.submit === 'startMany' && x.workerProcesses === 0) as EndToEnd;
          line(`    DBOS ${d.version}, 1 process, 500 workflows started at once and awaited: ${fmt(d.stepsPerSec, 0)} steps/s (${fmt(d.concurrentS, 2)} s)`);
          line(
            `    → end to end from one process on PostgreSQL: Stepwise ${fmt(ours.stepsPerSec / d.stepsPerSec, 1)}× DBOS with start(), ${fmt(many.stepsPerSec / d.stepsPerSec, 1)}× with startMany`,
          );
        }
      }
    }
    if (base) {
      for (const workers of [0, 1, 2, 4]) {
        const mine = e2e.find((x) => x.build === 'this build' && x.store === 'postgres' && x.submit === 'start' && x.workerProcesses === workers);
        const theirs = e2e.find((x) => x.build === 'base' && x.store === 'postgres' && x.workerProcesses === workers);
        if (mine && theirs)
          line(`    → this build ÷ base, PostgreSQL, start(), ${workers || 'in-process'} worker${workers === 1 ? '' : 's'}: ${fmt(mine.stepsPerSec / theirs.stepsPerSec, 2)}×`);
      }
    }
  }
  results.endToEnd = e2e;
}
if (!coreOnly) await endToEndSection();
if (process.argv.includes('--e2e-only')) {
  if (pgUpFirst) await postgres.cleanup();
  mkdirSync(join(root, '.bench'), { recursive: true });
  writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.exit(0);
}

line('\n(a) Per-step overhead: one task of 1,000 sequential no-op steps, per step, vs one single-row INSERT');
line('    transaction on the same kind of file/database. "journal row" is a row with the journal\'s columns;');
line('    "minimal" is (serial id, text). Each round measures raw, engine, raw; a ratio is the median of the');
line("    rounds' own ratios (engine ÷ the raw writes around it), the times are medians.");
const overhead: Record<string, unknown> = {};
for (const sync of ['FULL', 'NORMAL'] as const) {
  const o = await sqlite.stepOverhead(sync, rounds);
  overhead[`sqlite-${sync}`] = o;
  line(
    `    SQLite WAL synchronous=${sync.padEnd(6)} step ${fmt(o.stepUs).padStart(7)} µs | raw journal row ${fmt(o.rawJournalUs).padStart(7)} µs → ${fmt(o.ratioJournal, 2)}× | raw minimal ${fmt(o.rawMinimalUs).padStart(7)} µs → ${fmt(o.ratioMinimal, 2)}×${spread(o)}`,
  );
}
const pgUp = await postgres.pgAvailable();
if (pgUp) {
  const o = await postgres.stepOverhead(rounds);
  overhead.postgres = o;
  line(
    `    PostgreSQL                     step ${fmt(o.stepUs).padStart(7)} µs | raw journal row ${fmt(o.rawJournalUs).padStart(7)} µs → ${fmt(o.ratioJournal, 2)}× | raw minimal ${fmt(o.rawMinimalUs).padStart(7)} µs → ${fmt(o.ratioMinimal, 2)}×${spread(o)}`,
  );
} else {
  line(`    PostgreSQL: not reachable at ${postgres.PG_URL}; skipped.`);
}
results.overhead = overhead;

line('\n(b) Drain: 500 tasks × 3 no-op steps, started beforehand and all due at once, run by warmed-up worker processes');
line(
  `    (concurrency 256 each, default claims (up to 256), default 500 ms poll; first claim → last finish, from the tasks' own history:\n    the starts and the result() calls are not in it;\n    each worker process warmed up with twice the batch, then ${WARM_UP_BURSTS} unmeasured bursts per process; per round the median of 3 batches;\n    median of ${rounds} interleaved round${rounds > 1 ? 's' : ''}).`,
);
const tp: sqlite.Throughput[] = [];
const medianOf = (runs: sqlite.Throughput[]): sqlite.Throughput => {
  const sorted = [...runs].sort((a, b) => a.stepsPerSec - b.stepsPerSec);
  return sorted[Math.floor(sorted.length / 2)] as sqlite.Throughput;
};
for (const sync of ['FULL', 'NORMAL'] as const) {
  const runs: sqlite.Throughput[] = [];
  for (let r = 0; r < rounds; r++) runs.push(await sqlite.throughput(`sqlite:${join(tempDir(), 'tp.db')}?synchronous=${sync.toLowerCase()}`, `sqlite ${sync}`, 500, 1));
  const t = medianOf(runs);
  tp.push(t);
  line(`    SQLite ${sync.padEnd(6)}  1 worker : ${fmt(t.tasksPerSec, 0).padStart(6)} tasks/s ${fmt(t.stepsPerSec, 0).padStart(7)} steps/s  (${fmt(t.seconds, 2)} s)${cpuNote(t)}`);
}
let dbosResult: postgres.DbosResult | { error: string } | null = null;
if (pgUp) {
  // Stepwise with 1, 2, 4 worker processes and DBOS, round after round, on the same database.
  // Also at concurrency 64 per worker (the upper end of the README's suggestion), where a burst of
  // 500 tasks needs several processes' slots: at 256, two processes hold a whole burst.
  const ours = new Map<number, sqlite.Throughput[]>();
  const ours64 = new Map<number, sqlite.Throughput[]>();
  const theirs: postgres.DbosResult[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const workers of [1, 2, 4]) ours.set(workers, [...(ours.get(workers) ?? []), await postgres.pgThroughput(workers, 500)]);
    for (const workers of [1, 2, 4]) ours64.set(workers, [...(ours64.get(workers) ?? []), await postgres.pgThroughput(workers, 500, 64)]);
    const d = postgres.dbos(500, 1000);
    if ('error' in d) {
      dbosResult = d;
      break;
    }
    theirs.push(d);
  }
  for (const workers of [1, 2, 4]) {
    const t = medianOf(ours.get(workers) ?? []);
    tp.push(t);
    line(
      `    PostgreSQL     ${workers} worker${workers > 1 ? 's' : ' '}: ${fmt(t.tasksPerSec, 0).padStart(6)} tasks/s ${fmt(t.stepsPerSec, 0).padStart(7)} steps/s  (${fmt(t.seconds, 2)} s)${cpuNote(t)}`,
    );
  }
  const at64 = [1, 2, 4].map((workers) => medianOf(ours64.get(workers) ?? []));
  results.throughputConcurrency64 = at64;
  line(`    PostgreSQL, concurrency 64 per worker, 1 / 2 / 4 workers: ${at64.map((t) => fmt(t.stepsPerSec, 0)).join(' / ')} steps/s`);
  if (dbosResult && 'error' in dbosResult) {
    line(`    DBOS Transact: failed to run (${dbosResult.error})`);
  } else {
    const d = [...theirs].sort((a, b) => a.stepsPerSec - b.stepsPerSec)[Math.floor(theirs.length / 2)] as postgres.DbosResult;
    dbosResult = d;
    // DBOS's batch includes starting its workflows and awaiting their results, which the drain does
    // not: no ratio is drawn against the drain (the like-for-like comparison is (e2e)).
    line(
      `    DBOS ${d.version}  1 process: ${fmt(d.tasksPerSec, 0).padStart(6)} tasks/s ${fmt(d.stepsPerSec, 0).padStart(7)} steps/s  (${fmt(d.concurrentS, 2)} s; 500 workflows started at once and awaited, in-process: compared in (e2e), not here)`,
    );
    // Both from the call to the answer, in one process: (a)'s step figure leaves out the start and the result.
    const ours = await postgres.callToAnswerUs(1000);
    results.callToAnswerUs = ours;
    line(
      `    Per step of a 1,000-step workflow, from the call (start) to the answer (result), in-process: Stepwise ${fmt(ours, 0)} µs, DBOS ${fmt(d.perStepUs, 0)} µs (${fmt(d.perStepUs / ours, 1)}×)`,
    );
  }
}
results.throughput = tp;
results.dbos = dbosResult;

line('\n(c) Wake-up latency: task started → its first step running, worker idle in another process');
const samples = quick ? 40 : 200;
const lat: postgres.Latency[] = [];
if (pgUp) lat.push(await postgres.wakeLatency(postgres.freshPgUrl('lat'), 'postgres (LISTEN/NOTIFY; poll 60 s)', samples, 60_000));
lat.push(await postgres.wakeLatency(`sqlite:${join(tempDir(), 'lat.db')}`, 'sqlite (polling every 500 ms)', Math.min(samples, 60), 500));
for (const l of lat) line(`    ${l.store.padEnd(38)} p50 ${fmt(l.p50Ms, 0).padStart(4)} ms   p99 ${fmt(l.p99Ms, 0).padStart(4)} ms   (${l.samples} samples)`);
results.latency = lat;
if (coreOnly) {
  if (pgUp) await postgres.cleanup();
  mkdirSync(join(root, '.bench'), { recursive: true });
  writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.exit(0);
}

await (await import('./idempotency.ts')).report({ line, rounds, quick, pgUp, results });

results.cancel = await (await import('./cancel.ts')).cancelLatency(quick, line);
await (await import('./stream-close.ts')).report({ quick, pgUp, line, results });
await (await import('./streams.ts')).report({ quick, pgUp, line, results });
await (await import('./fan-out.ts')).report({ quick, pgUp, line, results });
await (await import('./chat-turns.ts')).report({ quick, pgUp, line, results });
await (await import('./approvals.ts')).run({ quick, pgUp, line, results });
await (await import('./scale.ts')).run({ quick, pgUp, line, results });
await (await import('./retention.ts')).report({ quick, pgUp, line, results });
await (await import('./schedules.ts')).report({ quick, pgUp, line, results });
await (await import('./flow-control.ts')).report({ quick, pgUp, line, results });
await (await import('./rate-limits.ts')).report({ quick, pgUp, line, results });
await (await import('./search.ts')).report({ quick, pgUp, line, results });
await (await import('./fork.ts')).report({ quick, pgUp, line, results });
await (await import('./payloads.ts')).report({ quick, pgUp, line, results });
if (pgUp) await postgres.cleanup();
mkdirSync(join(root, '.bench'), { recursive: true });
writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
line('\nWritten to .bench/results.json');
