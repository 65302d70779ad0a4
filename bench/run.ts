// `npm run bench`: every figure is measured side by side in this one run, on this machine.
// Results are printed and written to .bench/results.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, root, tempDir } from './lib.ts';
import { stepOverhead, throughput, type StepOverhead, type Throughput } from './sqlite.ts';

const quick = process.argv.includes('--quick');
const rounds = quick ? 1 : 3;
const results: { machine: string; overhead: StepOverhead[]; throughput: Throughput[] } = {
  machine: `${process.version} on ${process.platform}/${process.arch}`,
  overhead: [],
  throughput: [],
};

console.log(`Stepwise benchmark (${results.machine})${quick ? ' — quick mode' : ''}\n`);
console.log('(a) Per-step overhead: one task of 1,000 sequential no-op steps vs one single-row INSERT transaction');
console.log('    on a file with the same settings (medians of interleaved rounds).');
for (const sync of ['FULL', 'NORMAL'] as const) {
  const o = await stepOverhead(sync, rounds);
  results.overhead.push(o);
  console.log(
    `    SQLite WAL synchronous=${sync.padEnd(6)}  step ${fmt(o.stepUs).padStart(7)} µs   raw journal-row INSERT ${fmt(o.rawJournalUs).padStart(7)} µs → ${fmt(o.ratioJournal, 2)}×` +
      `   raw minimal INSERT ${fmt(o.rawMinimalUs).padStart(7)} µs → ${fmt(o.ratioMinimal, 2)}×`,
  );
}

console.log('\n(b) Throughput: 500 tasks × 3 no-op steps, enqueued first, one worker process (first claim → last finish)');
for (const sync of ['FULL', 'NORMAL'] as const) {
  const db = `sqlite:${join(tempDir(), 'tp.db')}?synchronous=${sync.toLowerCase()}`;
  const t = await throughput(db, `sqlite ${sync}`, 500, 1);
  results.throughput.push(t);
  console.log(`    SQLite ${sync.padEnd(6)} 1 worker: ${fmt(t.tasksPerSec, 0).padStart(6)} tasks/s  ${fmt(t.stepsPerSec, 0).padStart(6)} steps/s  (${fmt(t.seconds, 2)} s)`);
}

mkdirSync(join(root, '.bench'), { recursive: true });
writeFileSync(join(root, '.bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
console.log('\nWritten to .bench/results.json');
