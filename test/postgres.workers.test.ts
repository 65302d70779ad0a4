// Worker processes on PostgreSQL: wake-ups by LISTEN/NOTIFY (workers here poll only every ten
// minutes, so anything that happens in seconds came through a notification), a listener that
// survives its connection being killed, cross-process cancel through the same channel, and crash
// recovery after SIGKILL.
import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine, openStore, workflow } from '../src/index.ts';
import { listener, order, pipeline, triple, waiter } from './fixtures/crash-workflows.ts';
import { PG_URL, hasPostgres, sql } from './support/postgres.ts';
import { eventually, schemasOfThisFile, tempDir, waitForStatus, transitionsOf } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';
import { spyStore } from './support/store-spy.ts';

const FIXTURE = 'test/fixtures/crash-workflows.ts';
const freshSchema = schemasOfThisFile('sw_workers');
const freshUrl = (): string => `${PG_URL}?schema=${freshSchema()}`;

const NO_POLL = ['--poll-ms', '600000'];

describe.skipIf(!(await hasPostgres()))('worker processes on PostgreSQL', () => {
  it('wakes an idle worker by notification when a task is started, resumed or signalled', async () => {
    const db = freshUrl();
    const log = join(tempDir(), 'effects.log');
    const engine = new Engine({ store: db, workflows: [triple, listener, waiter] });
    try {
      await engine.ready();
      const w = spawnCli(['worker', FIXTURE, '--db', db, ...NO_POLL], { STEPWISE_TEST_LOG: log });
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      // Started: the worker has already done its first (empty) claim; only a notification wakes it now.
      const a = await engine.start(triple, { n: 1 });
      expect(await engine.result(a.id, { timeout: '20s' })).toBe(6);
      // Resumed: paused before any worker took it, then resumed.
      const b = await engine.start(triple, { n: 2, delayMs: 1 }, { delay: '1h' });
      await engine.pause(b.id);
      await engine.resume(b.id);
      expect(await engine.result(b.id, { timeout: '20s' })).toBe(9);
      // Signalled: parked waiting for an event, woken by its arrival.
      const c = await engine.start(waiter);
      await waitForStatus(engine, c.id, 'waiting', 20_000);
      await engine.signal(c.id, 'go', 'green light');
      expect(await engine.result(c.id, { timeout: '20s' })).toBe('got green light');
      w.child.kill('SIGTERM');
      expect((await w.exited).code).toBe(0);
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('sends finished tasks only to processes that wait for a result, from their first result()', async () => {
    const db = freshUrl();
    const schema = new URL(db).searchParams.get('schema') as string;
    const listeners = async (channel: string): Promise<number> => (await sql(`SELECT 1 FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${schema}_${channel}"`])).length;
    const starter = new Engine({ store: db, workflows: [triple] });
    try {
      await starter.ready();
      const w = spawnCli(['worker', FIXTURE, '--db', db, ...NO_POLL]);
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      const first = await starter.start(triple, { n: 1 });
      await waitForStatus(starter, first.id, 'succeeded', 20_000);
      // The worker and the starter listen for work; nobody has waited for a result yet.
      expect(await listeners('wake')).toBe(2);
      expect(await listeners('done')).toBe(0);
      expect(await starter.result(first.id)).toBe(6);
      expect(await listeners('done')).toBe(1); // the starter, from its first result() on
      const second = await starter.start(triple, { n: 2 });
      expect(await starter.result(second.id, { timeout: '20s' })).toBe(9);
      expect(await listeners('done')).toBe(1); // one subscription, kept
      w.child.kill('SIGTERM');
      expect((await w.exited).code).toBe(0);
    } finally {
      await starter.close();
    }
    await eventually(async () => (await listeners('done')) === 0 && (await listeners('wake')) === 0, 20_000, 'close to end both listeners');
  }, 60_000);

  it('a process waiting for many results of a worker process hears them by notification and reads them in groups', async () => {
    const db = freshUrl();
    const inner = await openStore(db);
    let singles = 0;
    const groups: number[] = [];
    const store = spyStore(inner, {
      getTask: (original) => async (id) => {
        singles++;
        return original(id);
      },
      getTasks: (original) => async (ids) => {
        groups.push(ids.length);
        return original(ids);
      },
    });
    const engine = new Engine({ store, workflows: [triple] });
    try {
      await engine.ready();
      const w = spawnCli(['worker', FIXTURE, '--db', db, ...NO_POLL, '--concurrency', '64']);
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      expect(await engine.result((await engine.start(triple, { n: 0 })).id, { timeout: '20s' })).toBe(3);
      const handles = await engine.startMany(Array.from({ length: 200 }, (_, i) => ({ workflow: triple, input: { n: i } })));
      singles = 0;
      groups.length = 0;
      expect(await Promise.all(handles.map((h) => h.result({ timeout: '60s' })))).toEqual(handles.map((_, i) => 3 * i + 3));
      // Never one read per task: the calls woken by one notification read their tasks together.
      expect(singles).toBe(0);
      expect(groups.length).toBeLessThan(50);
      w.child.kill('SIGTERM');
      expect((await w.exited).code).toBe(0);
    } finally {
      await engine.close();
      await inner.close();
    }
  }, 90_000);

  it('keeps receiving notifications after its LISTEN connection is killed', async () => {
    const db = freshUrl();
    const engine = new Engine({ store: db, workflows: [triple] });
    try {
      await engine.ready();
      const w = spawnCli(['worker', FIXTURE, '--db', db, ...NO_POLL]);
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      const killed = await sql<{ pid: number }>(
        `SELECT pg_terminate_backend(pid) AS killed, pid FROM pg_stat_activity
         WHERE application_name LIKE 'stepwise-listen%' AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
      );
      expect(killed.length).toBeGreaterThan(0);
      // The worker reconnects (100 ms backoff), re-subscribes and polls once for anything missed.
      await eventually(
        async () => (await sql(`SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'stepwise-listen%' AND query ILIKE 'LISTEN%'`)).length >= killed.length,
        20_000,
        'LISTEN to come back',
      );
      const { id } = await engine.start(triple, { n: 3 });
      expect(await engine.result(id, { timeout: '20s' })).toBe(12);
      w.child.kill('SIGTERM');
      await w.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('reaches the worker holding a running task with a cancel through the same channel', async () => {
    const db = freshUrl();
    const log = join(tempDir(), 'effects.log');
    const engine = new Engine({ store: db, workflows: [listener] });
    try {
      await engine.ready();
      // A one-minute heartbeat: the cancel cannot arrive by heartbeat within this test.
      const w = spawnCli(['worker', FIXTURE, '--db', db, ...NO_POLL, '--heartbeat-ms', '60000', '--lease-ms', '600000'], { STEPWISE_TEST_LOG: log });
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      const { id } = await engine.start(listener, { ms: 120_000 });
      await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'the step to start');
      await engine.cancel(id, { reason: 'stop it' });
      await waitForStatus(engine, id, 'cancelled', 20_000);
      const aborted = readLog(log).find((l) => l.event === 'aborted') as { reason?: string; message?: string } | undefined;
      expect(aborted?.reason).toBe('TaskCancelledError');
      expect(aborted?.message).toContain('stop it');
      w.child.kill('SIGTERM');
      await w.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  it("resumes a SIGKILLed worker's task on another worker without re-running finished steps", async () => {
    const db = freshUrl();
    const log = join(tempDir(), 'effects.log');
    const engine = new Engine({ store: db, workflows: [pipeline] });
    try {
      const { id } = await engine.start(pipeline, { slowMs: 1500 });
      const args = ['worker', FIXTURE, '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '100'];
      // Worker A stays in slow-write until it is killed (the file it waits for is never made): a
      // busy machine that is slow to see it start cannot let it finish the step first.
      const a = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_HOLD_UNTIL: join(tempDir(), 'never') });
      await eventually(() => readLog(log).some((l) => l.event === 'start' && l.pid === a.pid), 20_000, 'worker A to start slow-write');
      a.child.kill('SIGKILL');
      await a.exited;
      const b = spawnCli(args, { STEPWISE_TEST_LOG: log });
      expect((await engine.result<{ writtenBy: number }>(id, { timeout: '30s' })).writtenBy).toBe(b.pid);
      const effects = (step: string): number[] =>
        readLog(log)
          .filter((l) => l.event === 'effect' && l.key === `v1:${id}:${step}#1`)
          .map((l) => l.pid);
      expect([effects('fetch'), effects('transform'), effects('slow-write'), effects('notify')]).toEqual([[a.pid], [a.pid], [b.pid], [b.pid]]);
      const info = await engine.get(id);
      expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'reclaim', 'complete']);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('accepts --db postgres://…?schema= in every CLI command', async () => {
    const db = freshUrl();
    const cli = async (...args: string[]): Promise<string> => {
      const p = spawnCli([...args, '--db', db]);
      const { code } = await p.exited;
      expect(code, `${args.join(' ')}: ${p.output()}`).toBe(0);
      return p.output();
    };
    expect(await cli('migrate')).toContain('Schema is up to date');
    const review = workflow('cli-review', async (ctx) => (await ctx.approval('review', { approvers: ['alice'] })).approved);
    const engine = new Engine({ store: db, workflows: [triple, waiter, order, review] });
    const spawned: Array<ReturnType<typeof spawnCli>> = [];
    try {
      // A worker that has served `triple` once registered it: the CLI, without the code, may start it.
      const w = engine.worker();
      await w.start();
      await w.stop();
      const { id } = JSON.parse(await cli('start', 'triple', '--input', '{"n":0}', '--json')) as { id: string };
      expect((JSON.parse(await cli('ls', '--json')) as { tasks: Array<{ id: string }> }).tasks.map((t) => t.id)).toEqual([id]);
      expect(await cli('show', id)).toContain('create');
      expect(await cli('explain', id)).toContain('legal events: cancel, pause');
      expect(await cli('pause', id)).toContain(`${id} → paused`);
      expect(await cli('resume', id)).toContain(`${id} → pending`);
      expect(await cli('signal', id, 'go', '--data', '{"x":1}')).toContain(`Sent "go" to ${id}`);
      expect(await cli('cancel', id, '--as', 'ops')).toContain(`${id} → cancelled`);
      const info = await engine.get(id);
      expect(info.status).toBe('cancelled');
      expect(info.history.some((e) => e.type === 'signal:received' && e.name === 'go')).toBe(true);
      expect(info.history[info.history.length - 1]?.actor).toEqual({ kind: 'user', id: 'ops' });
      const failing = await engine.start(triple, { n: 1 });
      await engine.cancel(failing.id);
      const retry = spawnCli(['retry', failing.id, '--db', db]);
      expect((await retry.exited).code).toBe(1);
      // A cancelled task runs again only from a named step (a re-run).
      expect(retry.output()).toContain('[CONFLICT]');
      expect(await cli('purge', '--older-than', '30d', '--dry-run')).toMatch(/\b0\b/);
      await cli('delete', failing.id);
      await expect(engine.get(failing.id)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });

      // The worker command, and the commands that need one to move the task.
      const worker = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', db, '--poll-ms', '50']);
      spawned.push(worker);
      await eventually(() => worker.output().includes('started; workflows'), 20_000, 'the worker to start');
      await cli('start', 'triple', '--input', '{"n":2}', '--wait');
      const inputs = join(tempDir(), 'inputs.jsonl');
      writeFileSync(inputs, '{"n":10}\n{"n":20}\n');
      await cli('start', 'triple', '--inputs', inputs);
      await eventually(async () => (await engine.list({ workflow: 'triple', status: ['succeeded'] })).tasks.length === 3, 20_000, 'three triples to succeed');
      const machineTask = await engine.start(order, { sku: 'a', slowMs: 0 });
      await waitForStatus(engine, machineTask.id, 'waiting', 20_000);
      await cli('send', machineTask.id, 'reject');
      await waitForStatus(engine, machineTask.id, 'succeeded', 20_000);

      // Approvals, decided through the CLI (the approval workflow runs in this process).
      const inProcess = engine.worker({ workflows: ['cli-review'], pollIntervalMs: 20 });
      await inProcess.start();
      const approved = await engine.start(review);
      const rejected = await engine.start(review);
      await eventually(async () => (await engine.approvals({ status: 'pending' })).length === 2, 20_000, 'two pending approvals');
      const listed = JSON.parse(await cli('approvals', '--pending', '--json')) as unknown;
      const pending = (Array.isArray(listed) ? listed : (listed as { approvals: unknown[] }).approvals) as Array<{ id: string; taskId: string }>;
      expect(pending).toHaveLength(2);
      const idOf = (taskId: string): string => pending.find((x) => x.taskId === taskId)!.id;
      expect(await cli('approve', idOf(approved.id), '--as', 'alice')).toContain('→ approved');
      expect(await cli('reject', idOf(rejected.id), '--as', 'alice')).toContain('→ rejected');
      expect(await engine.result(approved.id)).toBe(true);
      expect(await engine.result(rejected.id)).toBe(false);

      // serve: the HTTP API on the same schema.
      const server = spawnCli(['serve', 'test/fixtures/crash-workflows.ts', '--db', db, '--port', '0'], { STEPWISE_TOKENS: 'ops:viewer:a-long-enough-viewer-token-0123456789' });
      spawned.push(server);
      await eventually(() => /"msg":"listening"/.test(server.output()), 20_000, 'the server to listen').catch((e: Error) => {
        throw new Error(`${e.message}: ${server.output()}`);
      });
    } finally {
      for (const p of spawned) p.child.kill('SIGTERM');
      await Promise.all(spawned.map((p) => p.exited));
      await engine.close();
    }
  }, 120_000);
});
