// `stepwise worker --log`: the structured log of transitions and approvals on the worker's
// standard output (JSON lines by default when it is not a terminal), and an unknown format refused.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { reviewed } from './fixtures/approval-workflows.ts';
import { eventually, tempDir } from './support/engine.ts';
import { runCli, spawnCli } from './support/processes.ts';

const jsonLines = (text: string): Array<Record<string, unknown>> =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('stepwise worker --log', () => {
  it('writes JSON log lines for a transition and an approval request by default off a terminal', async () => {
    const db = `sqlite:${join(tempDir(), 'log.db')}`;
    const worker = spawnCli(['worker', 'test/fixtures/approval-workflows.ts', '--db', db, '--poll-ms', '20'], { STEPWISE_TEST_SLOW_MS: '1' });
    const engine = new Engine({ store: db, workflows: [reviewed] });
    try {
      await eventually(() => worker.output().includes('started; workflows'), 20_000, `worker start: ${worker.output()}`);
      const { id } = await engine.start(reviewed);
      await eventually(() => jsonLines(worker.output()).some((l) => l.msg === 'approval requested' && l.taskId === id), 20_000, `the approval line: ${worker.output()}`);
      const lines = jsonLines(worker.output());
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'transition', taskId: id, event: 'claim', from: 'pending', to: 'running', service: 'stepwise' }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'approval requested', taskId: id, approval: 'review', approvers: ['alice'] }));
    } finally {
      await engine.close();
      worker.child.kill('SIGTERM');
      expect((await worker.exited).code).toBe(0);
    }
  }, 60_000);

  it('writes no log with --log none, and refuses an unknown format naming the known ones', async () => {
    const db = `sqlite:${join(tempDir(), 'none.db')}`;
    const worker = spawnCli(['worker', 'test/fixtures/approval-workflows.ts', '--db', db, '--poll-ms', '20', '--log', 'none'], { STEPWISE_TEST_SLOW_MS: '1' });
    const engine = new Engine({ store: db, workflows: [reviewed] });
    try {
      await eventually(() => worker.output().includes('started; workflows'), 20_000, `worker start: ${worker.output()}`);
      const { id } = await engine.start(reviewed);
      await eventually(async () => (await engine.get(id)).approvals.length === 1, 20_000, 'the approval');
      await eventually(() => worker.output().includes(`task ${id} claimed`), 20_000, `the claim line: ${worker.output()}`);
      expect(jsonLines(worker.output())).toEqual([]);
    } finally {
      await engine.close();
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    const refused = runCli(['worker', 'test/fixtures/approval-workflows.ts', '--db', db, '--log', 'yaml']);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('[INVALID_ARGUMENT] --log must be one of json, pretty, none, got "yaml".');
  }, 60_000);
});

describe('stepwise worker --quiet', () => {
  it('writes no JSON log unless --log asks for it (the log of a whole run is read after the worker exits)', async () => {
    const db = `sqlite:${join(tempDir(), 'quiet.db')}`;
    const engine = new Engine({ store: db, workflows: [reviewed] });
    try {
      for (const log of [[], ['--log', 'json']]) {
        const worker = spawnCli(['worker', 'test/fixtures/approval-workflows.ts', '--db', db, '--poll-ms', '20', '--quiet', ...log], { STEPWISE_TEST_SLOW_MS: '1' });
        await eventually(() => worker.output().includes('started; workflows'), 20_000, `worker start: ${worker.output()}`);
        const { id } = await engine.start(reviewed);
        await eventually(async () => (await engine.get(id)).approvals.length === 1, 20_000, 'the approval');
        worker.child.kill('SIGTERM');
        expect((await worker.exited).code).toBe(0);
        const requested = jsonLines(worker.output()).filter((l) => l.msg === 'approval requested' && l.taskId === id);
        expect(requested).toHaveLength(log.length === 0 ? 0 : 1);
      }
    } finally {
      await engine.close();
    }
  }, 60_000);
});

describe('--log pretty', () => {
  it('turns a pino JSON line into one readable line without the fields every line has', async () => {
    const { prettyLine } = await import('../src/cli/logging.ts');
    const line = JSON.stringify({
      level: 30,
      time: Date.UTC(2026, 0, 1, 12, 0, 1, 234),
      pid: 1,
      hostname: 'h',
      service: 'stepwise',
      msg: 'transition',
      taskId: 't1',
      event: 'claim',
      actor: { kind: 'worker', id: 'w1' },
      detail: null,
    });
    expect(prettyLine(line)).toBe('12:00:01.234 INFO transition taskId=t1 event=claim actor={"kind":"worker","id":"w1"}');
  });
});
