/**
 * `npm run example:agent`: the research agent answers a question with a tool-calling loop in
 * which every model call and tool call is a durable step, streaming its answer as it is written,
 * then prints the steps and the tokens and cost of every model attempt.
 *
 * With no OPENAI_API_KEY it starts the offline stand-in model (offline-model.ts), which speaks
 * the OpenAI protocol over local HTTP. With a key, the same code talks to the real provider.
 */
import { Engine, formatMs } from '../../src/index.ts';
import { streamEvents } from '../../src/ai/index.ts';
import { startOfflineModel, type OfflineModel } from './offline-model.ts';
import { researchAgent } from './workflow.ts';

const question = process.argv.slice(2).join(' ') || 'How do leases and fencing keep two workers from running the same task?';

async function main(): Promise<void> {
  let offline: OfflineModel | null = null;
  if (!process.env.OPENAI_API_KEY) {
    offline = await startOfflineModel();
    process.env.STEPWISE_AGENT_BASE_URL = offline.baseURL;
    console.log(`No OPENAI_API_KEY: using the offline model at ${offline.baseURL}\n`);
  }
  const engine = new Engine({ store: 'sqlite:./.stepwise/research-agent.db', workflows: [researchAgent] });
  const worker = engine.worker({ concurrency: 1 });
  await worker.start();
  try {
    const task = await engine.start(researchAgent, { question, maxTurns: 6 });
    const id = task.id;
    console.log(`Task ${id}: ${question}\n`);
    // The answer as it streams (any process could read it the same way, and resume after a seq).
    for await (const f of streamEvents(engine, id, { pollMs: 50 })) process.stdout.write(f.type === 'stream:reset' ? '\n[retrying]\n' : f.delta);
    const out = await task.result();
    const info = await engine.get(id);
    console.log(`\n\nAnswer (${out.modelCalls} model calls; tools: ${out.toolCalls.join(', ') || 'none'}):\n${out.answer}\n`);
    console.log('Steps:');
    for (const s of info.steps) console.log(`  ${s.name.padEnd(10)} ${s.status.padEnd(10)} ${formatMs(s.durationMs ?? 0).padStart(7)}  attempts ${s.attempts || 1}`);
    const u = info.usage;
    if (u) {
      console.log('\nModel usage:');
      for (const [step, t] of Object.entries(u.steps))
        console.log(`  ${step.padEnd(10)} ${String(t.inputTokens).padStart(6)} in ${String(t.outputTokens).padStart(5)} out  $${t.costUsd.toFixed(6)}`);
      console.log(
        `  ${'total'.padEnd(10)} ${String(u.total.inputTokens).padStart(6)} in ${String(u.total.outputTokens).padStart(5)} out  $${u.total.costUsd.toFixed(6)}  (${u.total.attempts} attempts)`,
      );
    }
    console.log(`\nSee it all: npx stepwise show ${id} --db sqlite:./.stepwise/research-agent.db`);
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
