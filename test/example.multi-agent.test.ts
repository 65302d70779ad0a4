// The multi-agent example: a planner fans out to research agents as child tasks over the offline
// model, in this process; a cancel of the planner stops every sub-agent (`stepwise cancel`, a real
// process).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, TaskCancelledError } from '../src/index.ts';
import { planner, researchAgent } from '../examples/multi-agent/workflow.ts';
import { startOfflineModel, type OfflineModel } from '../examples/research-agent/offline-model.ts';
import { FAST, tempDir, waitForStatus } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';

let model: OfflineModel;
beforeEach(async () => {
  model = await startOfflineModel({ paceMs: 5 });
  process.env.STEPWISE_AGENT_BASE_URL = model.baseURL;
});
afterEach(async () => {
  await model.close();
});

describe('multi-agent example', () => {
  it('the planner fans out to three research agents as child tasks and merges their answers', async () => {
    const engine = new Engine({ store: `sqlite:${join(tempDir(), 'multi.db')}`, workflows: [planner, researchAgent] });
    const worker = engine.worker({ ...FAST, concurrency: 4 });
    try {
      await worker.start();
      const { id } = await engine.start(planner, { topic: 'durable execution' });
      const out = await engine.result<{ report: string; subAgents: number; modelCalls: number }>(id, { timeout: '60s' });
      expect(out.subAgents).toBe(3);
      expect(out.report.split('## ')).toHaveLength(4);
      const info = await engine.get(id);
      expect(info.children.map((c) => `${c.workflow}:${c.status}`)).toEqual(Array(3).fill('research-agent:succeeded'));
      expect(info.usage?.children?.costUsd).toBeGreaterThan(0);
    } finally {
      await worker.stop();
      await engine.close();
    }
  }, 90_000);

  it('stepwise cancel of the planner stops every sub-agent, then the planner', async () => {
    await model.close();
    model = await startOfflineModel({ paceMs: 200 }); // slow answers: still streaming at the cancel
    process.env.STEPWISE_AGENT_BASE_URL = model.baseURL;
    const db = `sqlite:${join(tempDir(), 'multi.db')}`;
    const engine = new Engine({ store: db, workflows: [planner, researchAgent] });
    const worker = engine.worker({ ...FAST, concurrency: 4 });
    try {
      await worker.start();
      const { id } = await engine.start(planner, { topic: 'durable execution' });
      await waitForStatus(engine, id, 'waiting', 30_000);
      const cancel = spawnCli(['cancel', id, '--db', db, '--reason', 'enough']);
      expect((await cancel.exited).code).toBe(0);
      expect(await engine.result(id, { timeout: '60s' }).catch((e: unknown) => e)).toBeInstanceOf(TaskCancelledError);
      const info = await engine.get(id);
      expect(info.children).toHaveLength(3);
      expect(info.children.every((c) => c.status === 'cancelled')).toBe(true);
    } finally {
      await worker.stop();
      await engine.close();
    }
  }, 90_000);
});
