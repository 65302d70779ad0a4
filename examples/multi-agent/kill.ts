/**
 * `npm run example:multi-agent:kill`: the planner and its sub-agents survive a worker killed
 * mid-way.
 *
 * 1. Starts the planner on the embedded SQLite store (./.stepwise/multi-agent-kill.db) and two
 *    worker processes (`stepwise worker examples/multi-agent/workflow.ts`).
 * 2. While a sub-agent streams its answer, kills the worker that runs the most sub-agents with
 *    SIGKILL, on purpose.
 * 3. The other worker reclaims them when their leases expire: each resumes at its interrupted call,
 *    and no sub-agent is started twice.
 * 4. Prints who ran each sub-agent, and how many model requests were made again: only calls the
 *    kill interrupted may be.
 *
 * It always uses the offline model (examples/research-agent/offline-model.ts), which counts them.
 */
import { rmSync } from 'node:fs';
import { Engine, type TaskInfo } from '../../src/index.ts';
import { startOfflineModel } from '../research-agent/offline-model.ts';
import { LEASE_MS, startWorker, stopWorkers, until, type WorkerProcess } from './processes.ts';
import { planner, researchAgent } from './workflow.ts';

const FILE = '.stepwise/multi-agent-kill.db';
const DB = `sqlite:./${FILE}`;

/** The workers (by id) that wrote anything of the task: its claims, checkpoints and end. */
function ranBy(task: TaskInfo): string[] {
  return [...new Set(task.history.filter((h) => h.actor.kind === 'worker').map((h) => h.actor.id))];
}

async function main(): Promise<void> {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${FILE}${suffix}`, { force: true });
  const model = await startOfflineModel({ paceMs: 100 });
  const engine = new Engine({ store: DB, workflows: [planner, researchAgent] });
  const workers: WorkerProcess[] = [startWorker('worker-1', DB, model.baseURL), startWorker('worker-2', DB, model.baseURL)];
  try {
    const { id } = await engine.start(planner, { topic: 'durable execution' });
    console.log(`Planner ${id}: three sub-agents (child tasks) on two worker processes, in ${DB}\n`);
    // The sub-agents running now, each with the worker that holds its lease.
    const running = async (): Promise<TaskInfo[]> => {
      const children = await Promise.all((await engine.get(id)).children.map((c) => engine.get(c.id)));
      return children.filter((c) => c.status === 'running' && c.lease);
    };
    let before: TaskInfo[] = [];
    await until('a sub-agent streaming its answer', async () => (before = await running()).length > 0 && model.streaming > 0);
    const load = (w: WorkerProcess): number => before.filter((c) => c.lease?.owner === w.id).length;
    const victim = [...workers].sort((a, b) => load(b) - load(a))[0] as WorkerProcess;
    victim.child.kill('SIGKILL');
    await victim.exited;
    // Its leases outlive it: the sub-agents it held when it died.
    const interrupted = (await running()).filter((c) => c.lease?.owner === victim.id).map((c) => c.id);
    console.log(`✗ Killed ${victim.id} (pid ${victim.child.pid}) with SIGKILL while it ran ${interrupted.length} sub-agent(s): ${interrupted.join(', ')}`);
    console.log(`  Their leases expire within ${LEASE_MS / 1000}s; the other worker reclaims them and resumes each at its interrupted call.\n`);

    const out = await engine.result<{ modelCalls: number }>(id, { timeout: '90s' });
    const info = await engine.get(id);
    const children = await Promise.all(info.children.map((c) => engine.get(c.id)));
    console.log(`Planner ${info.status}: ${children.length} sub-agents (started once each), ${out.modelCalls} model calls.`);
    for (const c of children) {
      const note = interrupted.includes(c.id) ? '  ← interrupted by the kill, reclaimed' : '';
      console.log(`  ${c.id}  ${c.status.padEnd(9)} ${c.runs} run(s), by ${ranBy(c).join(' then ')}${note}`);
    }
    const again = model.requests - out.modelCalls;
    console.log(`\nThe model got ${model.requests} requests for ${out.modelCalls} model calls: ${again} made again (at most one per interrupted sub-agent).`);
    console.log(`See the tree: npx stepwise show ${id} --db ${DB}`);
    if (info.status !== 'succeeded' || again > interrupted.length || children.length !== 3) process.exitCode = 1;
  } finally {
    await stopWorkers(workers);
    await engine.close();
    await model.close();
  }
}

main().catch((e: unknown) => {
  console.error(`example:multi-agent:kill failed: ${e instanceof Error ? e.stack : String(e)}`);
  process.exit(1);
});
