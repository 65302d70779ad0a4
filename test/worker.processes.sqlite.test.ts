// Several processes on one SQLite file: migration at open, shared work, cross-process cancel.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Engine } from '../src/index.ts';
import { sqliteMigrations } from '../src/generated/sql.ts';
import { listener, triple } from './fixtures/crash-workflows.ts';
import { eventually, tempDir, waitForStatus, transitionsOf } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/crash-workflows.ts';

describe('several processes sharing one SQLite file', () => {
  it('migrates a new file once when four processes open it at the same moment', async () => {
    const file = join(tempDir(), 'fresh.db');
    const procs = Array.from({ length: 4 }, () => spawnCli(['migrate', '--db', `sqlite:${file}`]));
    const exits = await Promise.all(procs.map((p) => p.exited));
    expect(
      exits.map((e) => e.code),
      procs.map((p) => p.output()).join('\n'),
    ).toEqual([0, 0, 0, 0]);
    const db = new Database(file, { readonly: true });
    const rows = db.prepare('SELECT id, name FROM stepwise_migrations ORDER BY id').all();
    db.close();
    expect(rows).toEqual(sqliteMigrations.map((m) => ({ id: m.id, name: m.name }))); // each applied once
  }, 60_000);

  it('shares the work of 60 tasks among three worker processes, each task claimed once', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'shared.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [triple] });
    try {
      const workers = Array.from({ length: 3 }, () => spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '20', '--concurrency', '4'], { STEPWISE_TEST_LOG: log }));
      for (const w of workers) await eventually(() => w.output().includes('started; workflows'), 20_000, 'workers to start');
      const ids: string[] = [];
      // 20 ms per step: long enough that one worker's four slots cannot take all the work.
      for (let n = 0; n < 60; n++) ids.push((await engine.start('triple', { n, delayMs: 20 })).id);
      for (const [n, id] of ids.entries()) expect(await engine.result(id, { timeout: '60s' })).toBe(3 * n + 3);
      const tasks = (await engine.list({ limit: 100 })).tasks;
      expect(tasks.every((t) => t.status === 'succeeded' && t.runs === 1)).toBe(true);
      const effects = readLog(log);
      expect(effects).toHaveLength(180);
      expect(new Set(effects.map((e) => e.key)).size).toBe(180); // no step ran twice
      const byPid = new Set(effects.map((e) => e.pid));
      expect(byPid.size).toBeGreaterThan(1);
      for (const w of workers) w.child.kill('SIGTERM');
      const exits = await Promise.all(workers.map((w) => w.exited));
      expect(exits.map((e) => e.code)).toEqual([0, 0, 0]);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('cancels a task running in another process: the step signal fires there within a heartbeat', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'cancel.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [listener] });
    try {
      const { id } = await engine.start('listener', { ms: 60_000 });
      const w = spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '20', '--heartbeat-ms', '200'], { STEPWISE_TEST_LOG: log });
      await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'the step to start');
      expect((await engine.cancel(id, { reason: 'changed my mind' })).status).toBe('cancelling');
      // The step would run for 60 s: a task cancelled before then was stopped by its signal.
      await waitForStatus(engine, id, 'cancelled', 50_000);
      const aborted = readLog(log).find((l) => l.event === 'aborted') as { reason?: string; message?: string; at: number } | undefined;
      expect(aborted?.reason).toBe('TaskCancelledError');
      expect(aborted?.message).toContain('changed my mind');
      expect(readLog(log).filter((l) => l.event === 'effect')).toEqual([]);
      const info = await engine.get(id);
      expect(transitionsOf(info).map((h) => `${h.event}:${h.to}`)).toEqual(['create:pending', 'claim:running', 'cancel:cancelling', 'abort:cancelled']);
      expect(transitionsOf(info)[3]?.actor.id).toBe(transitionsOf(info)[1]?.actor.id);
      w.child.kill('SIGTERM');
      await w.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('takes over a cancelling task whose worker died and ends it cancelled, without running its step again', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'dead-cancel.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [listener] });
    try {
      const { id } = await engine.start('listener', { ms: 60_000 });
      const a = spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '20', '--lease-ms', '1000', '--heartbeat-ms', '200'], { STEPWISE_TEST_LOG: log });
      await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'the step to start');
      a.child.kill('SIGKILL');
      await a.exited;
      await engine.cancel(id, { reason: 'cleanup' });
      // A worker of its workflow reclaims it, still cancelling: its run knows of the cancel from
      // the start, so it runs the cleanup (none here) and no new step.
      const b = spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '20', '--lease-ms', '1000', '--heartbeat-ms', '200'], { STEPWISE_TEST_LOG: log });
      await waitForStatus(engine, id, 'cancelled', 15_000);
      const [reclaim, last] = transitionsOf(await engine.get(id)).slice(-2);
      expect(reclaim).toMatchObject({ event: 'reclaim', from: 'cancelling', to: 'cancelling' });
      expect(last).toMatchObject({ event: 'abort', from: 'cancelling', to: 'cancelled', detail: { reason: 'cleanup' } });
      expect(last?.actor).toEqual(reclaim?.actor);
      expect(readLog(log).filter((l) => l.event === 'start')).toHaveLength(1); // never resumed
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  /** A one-minute step running in a worker process with a one-minute lease, and an engine on its file. */
  async function longStepElsewhere(): Promise<{ engine: Engine; id: string; a: ReturnType<typeof spawnCli> }> {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'lease.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [listener] });
    const { id } = await engine.start('listener', { ms: 60_000 });
    const a = spawnCli(['worker', FIXTURE, '--db', db, '--poll-ms', '20', '--lease-ms', '60000', '--heartbeat-ms', '1000'], { STEPWISE_TEST_LOG: log });
    await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'the step to start');
    return { engine, id, a };
  }

  it('resumes at once the tasks of a worker process of this host that died, without waiting for its lease', async () => {
    // A one-minute lease: without the check, the restarted worker would wait for all of it.
    const { engine, id, a } = await longStepElsewhere();
    try {
      a.child.kill('SIGKILL');
      await a.exited;
      const leased = await engine.get(id);
      expect(leased.lease?.owner).toMatch(new RegExp(`-${a.pid}-`));
      const b = engine.worker({ pollIntervalMs: 20, leaseMs: 60_000, heartbeatMs: 1000 });
      await b.start();
      await eventually(async () => (await engine.get(id)).epoch === 2, 20_000, 'the restarted worker to reclaim the task');
      const info = await engine.get(id);
      expect(transitionsOf(info).map((e) => e.event)).toContain('reclaim');
      expect(info.lease?.owner).toBe(b.id);
      await engine.cancel(id);
      await waitForStatus(engine, id, 'cancelled', 20_000);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('leaves alone the leases of a worker of this host that is alive', async () => {
    const { engine, id, a } = await longStepElsewhere();
    try {
      const b = engine.worker({ pollIntervalMs: 20, leaseMs: 60_000, heartbeatMs: 1000 });
      await b.start(); // start() judges the leases of this host's workers before it claims
      expect((await engine.get(id)).epoch).toBe(1);
      expect((await engine.get(id)).lease?.owner).toMatch(new RegExp(`-${a.pid}-`));
      a.child.kill('SIGKILL');
      await a.exited;
    } finally {
      await engine.close();
    }
  }, 90_000);
});
