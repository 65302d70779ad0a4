// DBOS Transact doing the fan-out bench's work: a parent workflow that starts `n` child workflows
// (DBOS.startWorkflow inside the workflow, each a workflow of one no-op step returning when it ran)
// and awaits them all, in one process (DBOS runs a started workflow in the process that starts it).
// Warmed up with a parent of 50, then three measured parents; each timed from the call that starts
// the parent to its result, and from the last child's step to that result. Prints one JSON line.
// Usage: node bench/peers/dbos-fanout.mjs <postgres url of an existing database> <schema> <children>
import { DBOS } from '@dbos-inc/dbos-sdk';

process.noDeprecation = true;
const [url, schema, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 1000);

DBOS.setConfig({ name: 'stepwise-bench-fanout', systemDatabaseUrl: url, systemDatabaseSchemaName: schema, logLevel: 'error', applicationVersion: 'bench' });
const ran = DBOS.registerStep(async () => Date.now(), { name: 'noop' });
const leaf = DBOS.registerWorkflow(async () => ran(), { name: 'fan-leaf' });
const parent = DBOS.registerWorkflow(
  async (count) => {
    const handles = [];
    for (let i = 0; i < count; i++) handles.push(await DBOS.startWorkflow(leaf)());
    let latest = 0;
    for (const h of handles) latest = Math.max(latest, await h.getResult());
    return latest;
  },
  { name: 'fan-parent' },
);

await DBOS.launch();
async function once(count) {
  const t0 = performance.now();
  const h = await DBOS.startWorkflow(parent)(count);
  const latest = await h.getResult();
  const end = Date.now();
  return { totalMs: performance.now() - t0, wakeMs: end - latest };
}
await once(50);
const runs = [await once(n), await once(n), await once(n)].sort((a, b) => a.totalMs - b.totalMs);
await DBOS.shutdown();
console.log(JSON.stringify({ version: '5.3.0', children: n, totalMs: runs[1].totalMs, wakeMs: runs[1].wakeMs }));
