// The research-agent example run by real worker processes (the CLI) against its offline model
// over HTTP: a SIGKILL mid-loop resumes at the interrupted model call, and `stepwise cancel`
// stops the model mid-stream.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, TaskCancelledError, type UsageEvent } from '../src/index.ts';
import { streamEvents } from '../src/ai/index.ts';
import { researchAgent } from '../examples/research-agent/workflow.ts';
import { startOfflineModel, type OfflineModel } from '../examples/research-agent/offline-model.ts';
import { tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';

let model: OfflineModel;
beforeEach(async () => {
  // Slow words, so that the answer is still streaming when the test acts on it.
  model = await startOfflineModel({ paceMs: 100 });
});
afterEach(async () => {
  await model.close();
});

const WORKER = (db: string): string[] => ['worker', 'examples/research-agent/workflow.ts', '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];

/** Waits until the task's answer step has streamed some text. */
async function answerStreaming(engine: Engine, id: string): Promise<void> {
  for await (const f of streamEvents(engine, id, { pollMs: 20 })) if (f.step === 'model#3' && f.delta.length) return;
}

describe('research-agent example (real processes)', () => {
  it('resumes after a SIGKILL mid-loop: finished model and tool calls are not repeated, the interrupted call is billed', async () => {
    const db = `sqlite:${join(tempDir(), 'agent.db')}`;
    const engine = new Engine({ store: db, workflows: [researchAgent] });
    try {
      const { id } = await engine.start(researchAgent, { question: 'How do leases and fencing protect a task?' });
      const env = { STEPWISE_AGENT_BASE_URL: model.baseURL };
      const a = spawnCli(WORKER(db), env);
      await answerStreaming(engine, id);
      a.child.kill('SIGKILL');
      await a.exited;
      const b = spawnCli(WORKER(db), env);
      const out = await engine.result<{ answer: string; modelCalls: number; toolCalls: string[] }>(id, { timeout: '150s' });
      expect(out.toolCalls).toEqual(['search', 'read']);
      expect(out.answer).toContain('lease');
      const info = await engine.get(id);
      // Everything before the answer was done by the first worker (epoch 1) and read back.
      expect(info.steps.map((s) => [s.name, s.epoch])).toEqual([
        ['model', 1],
        ['search', 1],
        ['model#2', 1],
        ['read', 1],
        ['model#3', 2],
      ]);
      const usage = info.history.filter((e): e is UsageEvent => e.type === 'usage:attempt').map((e) => `${e.usage.step}#${e.usage.attempt}:${e.usage.outcome}`);
      expect(usage).toEqual(['model#1:succeeded', 'model#2#1:succeeded', 'model#3#1:interrupted', 'model#3#2:succeeded']);
      expect(info.usage?.total.costUsd).toBeGreaterThan(0);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 240_000);

  it('stops mid-stream on `stepwise cancel`: the task ends cancelled and the cut-off attempt is billed as cancelled', async () => {
    // A word a second: the answer streams for about a minute, so the cancel, from a CLI process
    // that takes seconds to start on a busy machine, still finds it streaming (at 100 ms a word
    // the answer could end first, and the task succeed).
    await model.close();
    model = await startOfflineModel({ paceMs: 1000 });
    const db = `sqlite:${join(tempDir(), 'agent.db')}`;
    const engine = new Engine({ store: db, workflows: [researchAgent] });
    try {
      const { id } = await engine.start(researchAgent, { question: 'What is a checkpoint?' });
      const w = spawnCli(WORKER(db), { STEPWISE_AGENT_BASE_URL: model.baseURL });
      await answerStreaming(engine, id);
      const cancel = spawnCli(['cancel', id, '--db', db]);
      expect((await cancel.exited).code).toBe(0);
      expect(await engine.result(id, { timeout: '150s' }).catch((e: unknown) => e)).toBeInstanceOf(TaskCancelledError);
      const info = await engine.get(id);
      const last = info.history.filter((e): e is UsageEvent => e.type === 'usage:attempt').at(-1)?.usage;
      expect(last).toMatchObject({ step: 'model#3', outcome: 'cancelled', estimated: true });
      w.child.kill('SIGTERM');
      await w.exited;
    } finally {
      await engine.close();
    }
  }, 240_000);
});
