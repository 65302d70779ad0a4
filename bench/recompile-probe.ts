// Run by bench/recompiles.ts in a process of its own, started with --trace-opt (V8 prints a line
// per optimising compile, with the time it took) and --expose-gc. Engine and worker in this
// process, on the store given; `bursts` bursts of `tasks` tasks of `steps` no-op steps, due
// together, each followed by a quiet spell with a full collection (what V8's memory reducer does
// to an idle process). Prints `BURST <n> start` / `BURST <n> end` around each burst: the parent
// counts the compiles between them. With `keep`, one task whose step waits for its signal stays
// in flight throughout, so that the run's objects of its kind never all die.
// Usage: node --trace-opt --expose-gc --import tsx bench/recompile-probe.ts <build> <store> <tasks> <steps> <bursts> <keep: 0|1>
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const [build, store, tasksArg, stepsArg, burstsArg, keepArg] = process.argv.slice(2) as [string, string, string, string, string, string];
const tasks = Number(tasksArg);
const steps = Number(stepsArg);
const bursts = Number(burstsArg);
const exposed = (globalThis as { gc?: () => void }).gc;
if (!exposed) throw new Error('recompile-probe: run with --expose-gc');
const gc: () => void = exposed;

const { Engine } = (await import(join(build, 'dist/index.js'))) as typeof import('../dist/index.js');
const { manySteps, cancellable } = (await import(join(build, 'bench/workflows.ts'))) as typeof import('./workflows.ts');
const engine = new Engine({ store, workflows: [manySteps, cancellable] });
await engine.ready();
const worker = engine.worker({ concurrency: 256 });
await worker.start();
// The long task's step appends to this file when it starts and when its signal fires (removed at the end).
const keptLog = join(tmpdir(), `stepwise-recompile-${process.pid}.log`);
const kept = keepArg === '1' ? await engine.start(cancellable, { log: keptLog }) : null;
let finished = 0;
let target = 0;
let allDone: () => void = () => undefined;
worker.on('run:finished', (e) => {
  if (e.workflow === manySteps.name && ++finished === target) allDone();
});
for (let b = 0; b < bursts; b++) {
  const done = new Promise<void>((resolve) => (allDone = resolve));
  target = finished + tasks;
  await engine.startMany(Array.from({ length: tasks }, () => ({ workflow: manySteps, input: { n: steps }, delay: 300 })));
  console.log(`BURST ${b} start`);
  await done;
  console.log(`BURST ${b} end`);
  gc();
  gc();
  await new Promise((resolve) => setTimeout(resolve, 200));
}
if (kept) await engine.cancel(kept.id);
await worker.stop();
await engine.close();
rmSync(keptLog, { force: true });
