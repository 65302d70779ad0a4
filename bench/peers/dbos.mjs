// DBOS Transact doing the benchmark's work, in its fastest single-process mode (workflows started
// directly with DBOS.startWorkflow, all at once, all awaited), in one process: a warm-up of twice
// the batch, then three measured batches, the median reported.
// Prints one JSON line with the figures. With --serve, runs batches when asked instead (see below).
// Usage: node bench/peers/dbos.mjs <postgres url of an existing database> <schema> <tasks> <steps-in-long-workflow> [--serve]
import { DBOS } from '@dbos-inc/dbos-sdk';

process.noDeprecation = true; // pg warns about queued queries inside DBOS at launch
const [url, schema, tasksArg, longArg] = process.argv.slice(2);
const tasks = Number(tasksArg ?? 500);
const longSteps = Number(longArg ?? 1000);

DBOS.setConfig({ name: 'stepwise-bench', systemDatabaseUrl: url, systemDatabaseSchemaName: schema, logLevel: 'error', applicationVersion: 'bench' });
const noop = async () => {};
const step = DBOS.registerStep(noop, { name: 'noop' });
const three = DBOS.registerWorkflow(async () => {
  await step();
  await step();
  await step();
  return 3;
}, { name: 'three-steps' });
const many = DBOS.registerWorkflow(async (n) => {
  for (let i = 0; i < n; i++) await DBOS.runStep(noop, { name: 'noop' });
  return n;
}, { name: 'many-steps' });

await DBOS.launch();
/** Seconds to start `tasks` workflows at once and await them all. */
async function batch() {
  const t0 = performance.now();
  const handles = await Promise.all(Array.from({ length: tasks }, () => DBOS.startWorkflow(three)()));
  await Promise.all(handles.map((h) => h.getResult()));
  return (performance.now() - t0) / 1000;
}
if (process.argv.includes('--serve')) {
  // Batches on demand, so that a caller can alternate them with its own in one run: each line
  // `batch` on stdin runs one and answers its seconds as a JSON line; `quit` (or the end of stdin)
  // shuts DBOS down.
  const { createInterface } = await import('node:readline');
  console.log(JSON.stringify({ ready: true, version: '5.3.0' }));
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === 'quit') break;
    if (line.trim() === 'batch') console.log(JSON.stringify({ seconds: await batch() }));
  }
  await DBOS.shutdown();
  process.exit(0);
}
// Warm-up (JIT, pool, plans), as for Stepwise's workers.
await batch();
await batch();
const concurrentS = [await batch(), await batch(), await batch()].sort((a, b) => a - b)[1];

await many(50); // warm-up
const t = performance.now();
await many(longSteps);
const perStepUs = ((performance.now() - t) * 1000) / longSteps;

await DBOS.shutdown();
console.log(JSON.stringify({ version: '5.3.0', tasks, concurrentS, tasksPerSec: tasks / concurrentS, stepsPerSec: (tasks * 3) / concurrentS, perStepUs }));
