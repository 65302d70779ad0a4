// Failure handling across a SIGKILLed worker (real processes): a chunked loop resumes after its
// last completed chunk, and a compensation interrupted by the crash runs again on the next worker.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { batch, saga } from './fixtures/failure-workflows.ts';
import { eventually, tempDir } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/failure-workflows.ts';
const ARGS = (db: string): string[] => ['worker', FIXTURE, '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];

describe('failure handling across a crash (SQLite, real processes)', () => {
  it('ctx.forEach: a SIGKILL in the middle of a chunk loses only that chunk; the next worker resumes after the last completed one', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'batch.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [batch] });
    try {
      const { id } = await engine.start(batch, { stallAt: 150 });
      const a = spawnCli(ARGS(db), { STEPWISE_TEST_LOG: log });
      await eventually(() => readLog(log).some((l) => l.key === '150'), 20_000, 'worker A to reach item 150');
      a.child.kill('SIGKILL');
      await a.exited;
      const b = spawnCli(ARGS(db), { STEPWISE_TEST_LOG: log, STEPWISE_TEST_NO_STALL: '1' });
      expect(await engine.result(id, { timeout: '30s' })).toBe(300);
      const by = (i: number): number[] =>
        readLog(log)
          .filter((l) => l.event === 'item' && l.key === String(i))
          .map((l) => l.pid);
      for (const i of [0, 99]) expect(by(i)).toEqual([a.pid]);
      for (const i of [100, 149, 150]) expect(by(i)).toEqual([a.pid, b.pid]);
      for (const i of [151, 299]) expect(by(i)).toEqual([b.pid]);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('a compensation interrupted by a SIGKILL runs again on the next worker, with the same idempotency key, and the task fails', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'saga.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [saga] });
    try {
      const { id } = await engine.start(saga);
      const a = spawnCli(ARGS(db), { STEPWISE_TEST_LOG: log });
      await eventually(() => readLog(log).some((l) => l.event === 'compensate-start'), 20_000, 'worker A to start the compensation');
      a.child.kill('SIGKILL');
      await a.exited;
      const b = spawnCli(ARGS(db), { STEPWISE_TEST_LOG: log, STEPWISE_TEST_NO_STALL: '1' });
      await eventually(async () => (await engine.get(id)).status === 'failed', 30_000, 'the task to fail');
      const lines = readLog(log);
      const starts = lines.filter((l) => l.event === 'compensate-start');
      expect(starts.map((l) => l.pid)).toEqual([a.pid, b.pid]);
      expect(new Set(starts.map((l) => l.key))).toEqual(new Set([`v1:${id}:compensate:book#1`]));
      expect(lines.filter((l) => l.event === 'compensate').map((l) => [l.pid, l.key])).toEqual([[b.pid, `v1:${id}:compensate:book#1:B1`]]);
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error.message).toMatch(/card declined/);
      expect(info.steps.map((s) => `${s.name}:${s.status}`)).toEqual(['book:completed', 'pay:failed', 'compensate:book:completed']);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);
});
