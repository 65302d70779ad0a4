// Run by bench/allocation.ts in a process of its own, started with a young generation large enough
// that no garbage collection runs during a burst (--min-semi-space-size / --max-semi-space-size):
// the heap's growth over a burst is then what the burst allocated. Engine and worker in this
// process, on the store given; bursts of `tasks` tasks of `steps` no-op steps, counted finished by
// the worker's own `run:finished` events (no result() call, whose waiting is not the worker's).
// Prints one line of JSON: bytes allocated and promises created per task, for each measured burst;
// and (tasks of one step or more) the bytes a run holds while it is in flight: the heap after a full
// collection with 256 runs inside their last step's function, less the heap once they have ended
// and the worker has stopped.
// Usage: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx
//          bench/allocation-probe.ts <build dir> <store url> <tasks> <steps>
import { PerformanceObserver } from 'node:perf_hooks';
import { promiseHooks } from 'node:v8';
import { join } from 'node:path';

const [build, store, tasksArg, stepsArg] = process.argv.slice(2) as [string, string, string, string];
const tasks = Number(tasksArg);
const steps = Number(stepsArg);
const exposed = (globalThis as { gc?: () => void }).gc;
if (!exposed) throw new Error('allocation-probe: run with --expose-gc');
const gc: () => void = exposed;
let collections = 0;
new PerformanceObserver((list) => (collections += list.getEntries().length)).observe({ entryTypes: ['gc'] });

// The build under test (its dist/ and its bench/workflows.ts, which imports that dist/).
const { Engine, workflow } = (await import(join(build, 'dist/index.js'))) as typeof import('../dist/index.js');
const { manySteps } = (await import(join(build, 'bench/workflows.ts'))) as typeof import('./workflows.ts');

/** Runs parked inside their last step's function until the probe opens the gate. */
const gate = { want: 0, entered: 0, allIn: (): void => undefined, open: (): void => undefined, opened: Promise.resolve() };
async function gatedStep(): Promise<number> {
  if (++gate.entered === gate.want) gate.allIn();
  await gate.opened;
  return 1;
}
const held = workflow('alloc-held', async (ctx, input: { n: number }) => {
  for (let i = 0; i < input.n; i++) await ctx.step(`s${i}`, i === input.n - 1 ? gatedStep : async () => i);
});
const engine = new Engine({ store, workflows: [manySteps, held] });
await engine.ready();

/** One burst: `tasks` started (not measured), then drained by a fresh worker at concurrency 256. */
async function burst(measure: 'bytes' | 'promises'): Promise<{ perTask: number; collections: number }> {
  await engine.startMany(Array.from({ length: tasks }, () => ({ workflow: manySteps, input: { n: steps } })));
  const worker = engine.worker({ concurrency: 256 });
  let finished = 0;
  let allDone!: () => void;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  worker.on('run:finished', () => {
    if (++finished === tasks) allDone();
  });
  gc();
  await new Promise((resolve) => setTimeout(resolve, 10)); // the collection's own event is counted before the burst
  let promises = 0;
  const stop = measure === 'promises' ? promiseHooks.onInit(() => void promises++) : null;
  const before = collections;
  const heapBefore = process.memoryUsage().heapUsed;
  await worker.start();
  await done;
  const heapAfter = process.memoryUsage().heapUsed;
  stop?.();
  await new Promise((resolve) => setTimeout(resolve, 10)); // lets the observer report a collection during the burst
  const during = collections - before;
  await worker.stop();
  return { perTask: measure === 'bytes' ? (heapAfter - heapBefore) / tasks : promises / tasks, collections: during };
}

for (let i = 0; i < 3; i++) await burst('bytes'); // warm-up: the code is compiled and optimised
const bytes: number[] = [];
let disturbed = 0;
for (let i = 0; i < 5; i++) {
  const b = await burst('bytes');
  if (b.collections) disturbed++;
  else bytes.push(b.perTask);
}
const promises: number[] = [];
for (let i = 0; i < 3; i++) promises.push((await burst('promises')).perTask);

/** Bytes a run holds in flight (see the header): 256 runs at once, each inside its last step. */
async function heldPerRun(): Promise<number> {
  const n = 256;
  gate.want = n;
  gate.entered = 0;
  const allIn = new Promise<void>((resolve) => (gate.allIn = resolve));
  gate.opened = new Promise<void>((resolve) => (gate.open = resolve));
  await engine.startMany(Array.from({ length: n }, () => ({ workflow: held, input: { n: steps } })));
  // No heartbeat during the measurement: one in flight holds every run it renews until it is answered.
  const worker = engine.worker({ concurrency: n, leaseMs: 900_000, heartbeatMs: 300_000 });
  let finished = 0;
  let allDone!: () => void;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  worker.on('run:finished', () => {
    if (++finished === n) allDone();
  });
  await worker.start();
  await allIn;
  gc();
  const during = process.memoryUsage().heapUsed;
  gate.open();
  await done;
  // Once the worker has stopped, every run's end has settled (the worker's bookkeeping follows a
  // run's last event by a few turns); what the stopped worker itself held is a few KB in all.
  await worker.stop();
  gc();
  const after = process.memoryUsage().heapUsed;
  return (during - after) / n;
}
const heldBytes: number[] = [];
if (steps > 0) for (let i = 0; i < 4; i++) heldBytes.push(await heldPerRun());
await engine.close();
console.log(JSON.stringify({ bytes, promises, disturbed, held: heldBytes.slice(1) }));
