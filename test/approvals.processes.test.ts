// Approvals across real processes: a worker killed (SIGKILL) after it asked for an approval does
// not ask twice when another worker resumes the task; on PostgreSQL a decision made by the CLI in
// another process wakes a worker that does not poll (LISTEN/NOTIFY), and the CLI lists, shows,
// explains and decides approvals.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, type ApprovalInfo } from '../src/index.ts';
import { reviewed } from './fixtures/approval-workflows.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { eventually, schemasOfThisFile, tempDir, waitForStatus } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/approval-workflows.ts';
const freshSchema = schemasOfThisFile('sw_approvals');
const postgresUp = await hasPostgres();

async function cli(db: string, ...args: string[]): Promise<string> {
  const p = spawnCli([...args, '--db', db]);
  const { code } = await p.exited;
  expect(code, `${args.join(' ')}: ${p.output()}`).toBe(0);
  return p.output();
}

describe('approvals across processes', () => {
  it('a worker SIGKILLed after asking for an approval: the next worker finds the same approval, and the decision reaches the task', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'approvals.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [reviewed] });
    try {
      const { id } = await engine.start(reviewed);
      const args = ['worker', FIXTURE, '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '100'];
      const a = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_SLOW_MS: '600000' });
      await eventually(() => readLog(log).some((l) => l.event === 'start' && l.pid === a.pid), 20_000, 'worker A to start the slow step');
      await eventually(async () => (await engine.get(id)).approvals.length === 1, 20_000, 'the approval');
      const asked = (await engine.get(id)).approvals[0] as ApprovalInfo;
      a.child.kill('SIGKILL');
      await a.exited;
      // Decided while no worker is alive (the task is still leased by the dead one): the record takes it.
      await engine.decide(asked.id, { approve: true, by: 'alice', data: { draft: 'v2' } });
      const b = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_SLOW_MS: '10' });
      expect(await engine.result(id, { timeout: '60s' })).toEqual({ published: 'v2', by: 'alice' });
      const info = await engine.get(id);
      expect(info.approvals.map((x) => [x.id, x.status])).toEqual([[asked.id, 'approved']]);
      expect(info.history.filter((e) => e.type === 'approval:requested')).toHaveLength(1);
      expect(
        readLog(log)
          .filter((l) => l.event === 'effect')
          .map((l) => l.pid),
      ).toEqual([b.pid]);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 90_000);

  it.skipIf(!postgresUp)(
    'on PostgreSQL, `stepwise approve` in another process wakes a worker that does not poll; the CLI lists, shows and explains the approval',
    async () => {
      const db = `${PG_URL}?schema=${freshSchema()}`;
      const engine = new Engine({ store: db, workflows: [reviewed] });
      try {
        await engine.ready();
        const w = spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '600000'], { STEPWISE_TEST_SLOW_MS: '1' });
        await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
        const { id } = await engine.start(reviewed);
        await waitForStatus(engine, id, 'waiting', 20_000);
        const [asked] = JSON.parse(await cli(db, 'approvals', '--pending', '--approver', 'alice', '--json')) as ApprovalInfo[];
        expect(asked).toMatchObject({ taskId: id, name: 'review', status: 'pending', approvers: ['alice'] });
        expect(JSON.parse(await cli(db, 'approvals', '--pending', '--approver', 'bob', '--json'))).toEqual([]);
        const approvalId = (asked as ApprovalInfo).id;
        expect(await cli(db, 'explain', id)).toContain(`approval "review" (${approvalId}, level 1) from alice`);
        expect(await cli(db, 'show', id)).toMatch(new RegExp(`Approvals[\\s\\S]*review ${approvalId}  pending[\\s\\S]*stepwise approve ${approvalId} --as <name>`));
        const refused = spawnCli(['approve', approvalId, '--as', 'mallory', '--db', db]);
        expect((await refused.exited).code).not.toBe(0);
        expect(refused.output()).toContain('[FORBIDDEN]');
        expect(await cli(db, 'approve', approvalId, '--as', 'alice', '--comment', 'ship it', '--data', '{"draft":"v3"}', '--key', 'k1')).toContain(
          `${approvalId} (review, task ${id}) → approved`,
        );
        expect(await cli(db, 'approve', approvalId, '--as', 'alice', '--key', 'k1')).toContain('→ approved');
        const conflict = spawnCli(['reject', approvalId, '--as', 'alice', '--db', db]);
        expect((await conflict.exited).code).not.toBe(0);
        expect(conflict.output()).toMatch(/\[CONFLICT\].*alice approved it/);
        expect(await engine.result(id, { timeout: '30s' })).toEqual({ published: 'v3', by: 'alice' });
        expect(await cli(db, 'show', id)).toMatch(/alice approved: ship it key=k1/);
        w.child.kill('SIGTERM');
        expect((await w.exited).code).toBe(0);
      } finally {
        await engine.close();
      }
    },
    240_000,
  ); // nine CLI processes, each seconds to start on a loaded machine
});
