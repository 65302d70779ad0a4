/**
 * `npm run example:multi-agent:cancel`: `stepwise cancel` of the planner stops every sub-agent
 * mid-stream, then the planner.
 *
 * 1. Starts the planner on the embedded SQLite store (./.stepwise/multi-agent-cancel.db) and a
 *    worker process (`stepwise worker examples/multi-agent/workflow.ts`).
 * 2. While its sub-agents stream their answers, runs `stepwise cancel <planner id>`, as an operator
 *    would from a shell.
 * 3. Each sub-agent's in-flight model call gets its AbortSignal and closes its stream (the model
 *    sees its client hang up); the sub-agents end cancelled, and then the planner.
 * 4. Prints the tree with `stepwise show`.
 *
 * It always uses the offline model (examples/research-agent/offline-model.ts), which counts the
 * streams closed before their end.
 */
import { rmSync } from 'node:fs';
import { Engine } from '../../src/index.ts';
import { startOfflineModel } from '../research-agent/offline-model.ts';
import { startWorker, stepwise, stopWorkers, until } from './processes.ts';
import { planner, researchAgent } from './workflow.ts';

const FILE = '.stepwise/multi-agent-cancel.db';
const DB = `sqlite:./${FILE}`;

async function main(): Promise<void> {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${FILE}${suffix}`, { force: true });
  const model = await startOfflineModel({ paceMs: 150 });
  const engine = new Engine({ store: DB, workflows: [planner, researchAgent] });
  const worker = startWorker('worker-1', DB, model.baseURL);
  try {
    const { id } = await engine.start(planner, { topic: 'durable execution' });
    console.log(`Planner ${id}: three sub-agents (child tasks) on a worker process, in ${DB}\n`);
    await until('the sub-agents streaming their answers', async () => model.streaming > 0 && (await engine.get(id)).children.length === 3);
    const args = ['cancel', id, '--db', DB, '--reason', 'the question changed'];
    console.log(`$ npx stepwise ${args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(' ')}`);
    console.log(`${stepwise(args).trimEnd()}\n`);
    await until('the planner to end', async () => (await engine.get(id)).status === 'cancelled');
    const children = (await engine.get(id)).children;
    // The model hears each client hang up on its own socket: wait for the first (a cancel that
    // closed no stream fails the demo below).
    await until('a model stream closed', async () => model.hungUp > 0, 10_000).catch(() => undefined);
    console.log(`Planner cancelled; sub-agents: ${children.map((c) => c.status).join(', ')}; ${model.hungUp} model stream(s) closed mid-answer.\n`);
    console.log(`$ npx stepwise show ${id} --db ${DB}`);
    console.log(stepwise(['show', id, '--db', DB]));
    if (!children.length || children.some((c) => c.status !== 'cancelled') || model.hungUp < 1) process.exitCode = 1;
  } finally {
    await stopWorkers([worker]);
    await engine.close();
    await model.close();
  }
}

main().catch((e: unknown) => {
  console.error(`example:multi-agent:cancel failed: ${e instanceof Error ? e.stack : String(e)}`);
  process.exit(1);
});
