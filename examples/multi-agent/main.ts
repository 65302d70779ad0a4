/**
 * `npm run example:multi-agent`: a planner fans a question out to three research agents (child
 * tasks), waits for them without holding a worker slot, and merges their answers; then prints the
 * tree and the tokens and cost added up over the sub-agents.
 *
 * With no OPENAI_API_KEY it starts the research agent's offline stand-in model.
 */
import { Engine } from '../../src/index.ts';
import { startOfflineModel, type OfflineModel } from '../research-agent/offline-model.ts';
import { planner, researchAgent } from './workflow.ts';

const DB = 'sqlite:./.stepwise/multi-agent.db';

async function main(): Promise<void> {
  let offline: OfflineModel | null = null;
  if (!process.env.OPENAI_API_KEY) {
    offline = await startOfflineModel();
    process.env.STEPWISE_AGENT_BASE_URL = offline.baseURL;
    console.log(`No OPENAI_API_KEY: using the offline model at ${offline.baseURL}\n`);
  }
  const engine = new Engine({ store: DB, workflows: [planner, researchAgent] });
  const worker = engine.worker({ concurrency: 4 });
  await worker.start();
  try {
    const task = await engine.start(planner, { topic: 'durable execution' });
    console.log(`Planner ${task.id}: three sub-agents at once\n`);
    const out = await task.result();
    const info = await engine.get(task.id);
    console.log(`${out.report}\n`);
    console.log(`Sub-agents (${out.subAgents}, ${out.modelCalls} model calls):`);
    for (const c of info.children) console.log(`  ${c.id}  ${c.workflow}  ${c.status}`);
    const below = info.usage?.children;
    if (below) console.log(`\nSub-agents' usage: ${below.inputTokens} in, ${below.outputTokens} out, $${below.costUsd.toFixed(6)} (${below.attempts} attempts)`);
    console.log(`\nThe tree: npx stepwise show ${task.id} --db ${DB}`);
  } finally {
    await worker.stop();
    await engine.close();
    await offline?.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
