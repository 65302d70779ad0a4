// The multi-agent example: a planner fans out to research agents as child tasks over the offline
// model, in this process; a cancel of the planner stops every sub-agent (`stepwise cancel`, a real
// process); and its two demos as a user runs them (`npm run example:multi-agent:kill` and
// `:cancel`: worker processes, one of them SIGKILLed; the CLI's cancel and show).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
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

  /** `node --import tsx examples/multi-agent/<script>` (what its npm script runs) in a fresh directory. */
  const demo = (script: string): { status: number | null; out: string } => {
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const root = new URL('..', import.meta.url).pathname;
    const r = spawnSync(process.execPath, ['--import', tsx, join(root, 'examples/multi-agent', script)], {
      cwd: tempDir(), // the demos write ./.stepwise/ in their working directory
      env: { ...process.env, NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 170_000, // beyond the demos' own limits (60 s to start, 90 s to finish): they stop their workers
    });
    return { status: r.status, out: r.stdout + r.stderr };
  };

  it('npm run example:multi-agent:kill: a worker SIGKILLed mid-stream; its sub-agents are reclaimed by the other and resumed, each started once, only interrupted model calls made again', () => {
    const { status, out } = demo('kill.ts');
    expect(status, out).toBe(0);
    const killed = /Killed (worker-\d) \(pid \d+\) with SIGKILL while it ran (\d) sub-agent/.exec(out);
    expect(killed, out).not.toBeNull();
    const [, victim, n] = killed as RegExpExecArray;
    expect(Number(n)).toBeGreaterThan(0);
    expect(out).toContain('Planner succeeded: 3 sub-agents (started once each)');
    expect(out.match(/← interrupted by the kill, reclaimed/g)).toHaveLength(Number(n));
    for (const line of out.split('\n').filter((l) => l.includes('← interrupted'))) expect(line).toMatch(new RegExp(`succeeded 2 run\\(s\\), by ${victim} then worker-\\d`));
    const again = /got (\d+) requests for (\d+) model calls: (\d+) made again/.exec(out);
    expect(again, out).not.toBeNull();
    const [, requests, calls, repeated] = (again as RegExpExecArray).map(Number);
    expect(requests).toBe((calls as number) + (repeated as number));
    expect(repeated).toBeLessThanOrEqual(Number(n));
  }, 200_000);

  it('npm run example:multi-agent:cancel: stepwise cancel of the planner closes the sub-agents’ model streams; all end cancelled and show draws the tree', () => {
    const { status, out } = demo('cancel.ts');
    expect(status, out).toBe(0);
    expect(out).toMatch(/\$ npx stepwise cancel \w+ --db sqlite:\.\/\.stepwise\/multi-agent-cancel\.db --reason 'the question changed'/);
    expect(out).toMatch(/Planner cancelled; sub-agents: cancelled, cancelled, cancelled; [1-3] model stream\(s\) closed mid-answer\./);
    expect(out).toMatch(/Tree\n\s+\w+\s+multi-agent-planner\s+cancelled/);
    expect(out.match(/─ \w+\s+research-agent\s+cancelled/g)).toHaveLength(3);
  }, 200_000);
});
