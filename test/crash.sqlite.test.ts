// Durability proven by killing real worker processes (SIGKILL), not by mocks.
import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine, rebuildTask } from '../src/index.ts';
import { pipeline } from './fixtures/crash-workflows.ts';
import { eventually, tempDir, transitionsOf } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/crash-workflows.ts';

describe('crash recovery on SQLite (real processes)', () => {
  it("resumes a SIGKILLed worker's task on another worker: finished steps run once, the interrupted step re-runs with the same key", async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'crash.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [pipeline] });
    try {
      const { id } = await engine.start('pipeline', { slowMs: 1500 });
      const args = ['worker', FIXTURE, '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];
      // Worker A stays in slow-write until it is killed (the file it waits for is never made): a
      // busy machine that is slow to see it start cannot let it finish the step first.
      const a = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_HOLD_UNTIL: join(dir, 'never') });
      await eventually(() => readLog(log).some((l) => l.event === 'start' && l.pid === a.pid), 20_000, 'worker A to start slow-write');
      a.child.kill('SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');

      const b = spawnCli(args, { STEPWISE_TEST_LOG: log });
      const output = await engine.result<{ writtenBy: number }>(id, { timeout: '30s' });
      expect(output.writtenBy).toBe(b.pid);

      const lines = readLog(log);
      const effects = (step: string): number[] => lines.filter((l) => l.event === 'effect' && l.key === `v1:${id}:${step}#1`).map((l) => l.pid);
      expect(effects('fetch')).toEqual([a.pid]);
      expect(effects('transform')).toEqual([a.pid]);
      expect(effects('slow-write')).toEqual([b.pid]);
      expect(effects('notify')).toEqual([b.pid]);
      const starts = lines.filter((l) => l.event === 'start');
      expect(starts.map((l) => l.pid)).toEqual([a.pid, b.pid]);
      expect(new Set(starts.map((l) => l.key))).toEqual(new Set([`v1:${id}:slow-write#1`]));

      const info = await engine.get(id);
      // The log alone rebuilds the task across the crash: status, output, and the journal as both
      // workers wrote it (each step with the epoch of the run that recorded it).
      const rebuilt = rebuildTask(info.history);
      expect(rebuilt.status).toBe(info.status);
      expect(rebuilt.output).toEqual(info.status === 'succeeded' ? info.output : undefined);
      expect(rebuilt.steps.map((s) => [s.seq, s.name, s.status, s.epoch, s.attempts, s.output])).toEqual(info.steps.map((s) => [s.seq, s.name, s.status, s.epoch, s.attempts, s.output]));
      expect(info.history.map((e) => e.seq)).toEqual(info.history.map((_, i) => i + 1));
      expect(info.status).toBe('succeeded');
      expect(info.runs).toBe(2);
      expect(transitionsOf(info).map((h) => `${h.event}:${h.from}->${h.to}`)).toEqual([
        'create:null->pending',
        'claim:pending->running',
        'reclaim:running->running',
        'complete:running->succeeded',
      ]);
      const reclaim = transitionsOf(info)[2];
      expect(reclaim?.detail).toMatchObject({ previousOwner: transitionsOf(info)[1]?.actor.id });
      expect(reclaim?.actor.id).not.toBe(transitionsOf(info)[1]?.actor.id);
      expect(info.steps.map((s) => [s.name, s.epoch])).toEqual([
        ['fetch', 1],
        ['transform', 1],
        ['slow-write', 2],
        ['notify', 2],
      ]);
      expect(b.output()).toContain('reclaimed after a lost worker');
      b.child.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('refuses the late checkpoint of a worker whose lease expired while its step was still running', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'zombie.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [pipeline] });
    try {
      const { id } = await engine.start('pipeline', { slowMs: 10 });
      const args = ['worker', FIXTURE, '--db', db, '--lease-ms', '1000', '--heartbeat-ms', '200', '--poll-ms', '50'];
      // Worker A stalls its event loop inside slow-write until B has finished the task: no
      // heartbeat, so its lease expires.
      const release = join(dir, 'release-a');
      const a = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_STALL_UNTIL: release });
      await eventually(() => readLog(log).some((l) => l.event === 'start' && l.pid === a.pid), 60_000, 'worker A to enter slow-write');
      // Worker B reclaims the task once A's lease has expired, and finishes it.
      const b = spawnCli(args, { STEPWISE_TEST_LOG: log });
      const output = await engine.result<{ writtenBy: number }>(id, { timeout: '90s' });
      expect(output.writtenBy).toBe(b.pid);
      writeFileSync(release, '');
      // A wakes up, its step returns, and its checkpoint is refused by the fencing epoch.
      await eventually(() => a.output().includes('lease lost'), 60_000, 'worker A to report its lost lease');
      expect(a.output()).toMatch(/lease lost \(epoch 1\)/);
      a.child.kill('SIGKILL');

      const info = await engine.get(id);
      const write = info.steps.find((s) => s.name === 'slow-write');
      expect(write?.epoch).toBe(2);
      expect(write?.output).toEqual({ pid: b.pid });
      expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'reclaim', 'complete']);
      // A's side effect did happen (it was past the point of no return), with the same idempotency
      // key as B's: the key is what lets the external system recognise the duplicate.
      const effects = readLog(log).filter((l) => l.event === 'effect' && l.key === `v1:${id}:slow-write#1`);
      expect(effects.map((l) => l.pid).sort()).toEqual([a.pid, b.pid].sort());
      // Nothing after the refused checkpoint ran in A.
      expect(readLog(log).filter((l) => l.pid === a.pid && l.key.endsWith('notify#1'))).toEqual([]);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 180_000);
});
