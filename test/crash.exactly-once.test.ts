// Exactly-once effects proven by killing real worker processes (SIGKILL) at every point of a
// transactional step — and the seeds' two failures (the data-sync agent, the daily report) shown
// fixed, on SQLite and (when reachable) PostgreSQL.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, Engine, type Worker } from '../src/index.ts';
import { dailyReport, dataSync, plainDataSync, smsAlert } from './fixtures/exactly-once-workflows.ts';
import { FAST, schemasOfThisFile, tempDir, waitForStatus } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { readLog, spawnCli } from './support/processes.ts';
import { userTable } from './support/user-table.ts';

const FIXTURE = 'test/fixtures/exactly-once-workflows.ts';
const WORKFLOWS = [dataSync, plainDataSync, dailyReport, smsAlert];
const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_once');
const source = [
  { id: 1, amount: 1.5 },
  { id: 2, amount: 2.25 },
  { id: 3, amount: 10 },
];
const expectedRows = [
  { id: 1, cents: 150 },
  { id: 2, cents: 225 },
  { id: 3, cents: 1000 },
];

const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'once.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL crash tests of exactly-once effects are skipped.');

/**
 * Starts the task, runs it on a worker process told to SIGKILL itself at `killAt`, waits for that
 * death, then finishes the task on a worker in this process. Returns what the log file recorded.
 */
async function crashThenResume(url: string, killAt: string, start: () => Promise<{ id: string }>): Promise<{ id: string; log: string; deadPid: number }> {
  const log = join(tempDir(), 'effects.log');
  // The worker in this process (the resume) records its effects in the same file.
  process.env.STEPWISE_TEST_LOG = log;
  const { id } = await start();
  const a = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log, STEPWISE_TEST_KILL_AT: killAt });
  const exit = await a.exited;
  expect(exit.signal, `worker A should die at ${killAt}; its output:\n${a.output()}`).toBe('SIGKILL');
  return { id, log, deadPid: a.pid };
}

async function resume(engine: Engine): Promise<Worker> {
  const w = engine.worker({ ...FAST, leaseMs: 1500 });
  await w.start();
  return w;
}

describe.each(stores)('exactly-once effects on $name (real processes, SIGKILL)', ({ url: makeUrl }) => {
  const points = ['transaction:begun', 'transaction:written', 'transaction:checkpointed', 'transaction:committed', 'notify:before'];
  it.each(points)(
    'the data-sync agent killed at %s: the target rows are written once and one notification is sent',
    async (point) => {
      const url = makeUrl();
      const engine = new Engine({ store: url, workflows: WORKFLOWS });
      try {
        await engine.ready();
        const target = userTable(url, 'target');
        await target.create('id INTEGER NOT NULL, cents INTEGER NOT NULL'); // no unique index: a second write would duplicate
        const { id, log, deadPid } = await crashThenResume(url, point, () => engine.start(dataSync, { table: target.name, source }));
        // Before the resume: what the dead worker committed, all or nothing.
        const committed = await target.rows('id');
        expect(committed).toEqual(point === 'transaction:committed' || point === 'notify:before' ? expectedRows : []);
        const worker = await resume(engine);
        expect(await engine.result(id, { timeout: '30s' })).toEqual({ written: 3 });
        await worker.stop();
        expect(await target.rows('id')).toEqual(expectedRows);
        const notes = readLog(log).filter((l) => l.event === 'notify');
        expect(notes.map((l) => l.key)).toEqual([`v1:${id}:notify#1`]);
        expect(notes[0]?.pid).not.toBe(deadPid);
        const info = await engine.get(id);
        expect(info.steps.find((s) => s.name === 'write-target')).toMatchObject({ status: 'completed', output: { written: 3 } });
        expect(info.runs).toBe(2);
      } finally {
        await engine.close();
      }
    },
    90_000,
  );

  it('without a transaction (a plain step writing on its own connection), the same crash writes the rows twice', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      await engine.ready();
      const target = userTable(url, 'target');
      await target.create('id INTEGER NOT NULL, cents INTEGER NOT NULL');
      const { id } = await crashThenResume(url, 'plain-write:after', () => engine.start(plainDataSync, { table: target.name, source, db: url }));
      const worker = await resume(engine);
      await engine.result(id, { timeout: '30s' });
      await worker.stop();
      // This is the seed's failure that ctx.transaction removes.
      expect(await target.rows('id')).toEqual(expectedRows.flatMap((r) => [r, r]));
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('the daily report re-run after a crash writes its rows once; a second start with its business key returns the first task', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      await engine.ready();
      const report = userTable(url, 'report');
      await report.create('day TEXT NOT NULL, metric TEXT NOT NULL, value INTEGER NOT NULL');
      const day = '2026-12-01';
      const start = (key: string): Promise<{ id: string; created: boolean }> => engine.start(dailyReport, { day, table: report.name }, { idempotencyKey: key });
      const { id, log } = await crashThenResume(url, 'transaction:written', () => start(`report:${day}:daily`));
      expect(await report.rows()).toEqual([]);
      const worker = await resume(engine);
      expect(await engine.result(id, { timeout: '30s' })).toEqual({ rows: 2 });
      const again = await start(`report:${day}:daily`);
      expect(again).toMatchObject({ id, created: false });
      // A manual re-run as a new task writes its own report rows, but the publication's business
      // key makes it a hit: the day is published once.
      const rerun = await start(`report:${day}:daily:rerun`);
      expect(rerun.created).toBe(true);
      await engine.result(rerun.id, { timeout: '30s' });
      await worker.stop();
      expect((await report.rows<{ metric: string }>()).map((r) => r.metric)).toEqual(['orders', 'revenue', 'orders', 'revenue']);
      expect(
        readLog(log)
          .filter((l) => l.event === 'publish')
          .map((l) => l.key),
      ).toEqual([`v1:report:${day}:publish`]);
      const hits = (await engine.get(rerun.id)).history.filter((e) => e.type === 'idempotency:hit');
      expect(hits).toHaveLength(1);
      expect((await engine.get(id)).runs).toBe(2);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('an at-most-once step whose worker died after the call: verify finds the message sent, and it is not sent again', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      const { id, log } = await crashThenResume(url, 'sms:after-send', () => engine.start(smsAlert, { verify: 'lookup' }));
      const worker = await resume(engine);
      expect(await engine.result(id, { timeout: '30s' })).toEqual({ sent: true, by: 'verify' });
      await worker.stop();
      expect(readLog(log).filter((l) => l.event === 'sms')).toHaveLength(1);
      expect(readLog(log).filter((l) => l.event === 'after')).toHaveLength(1);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('an at-most-once step whose worker died before the call: verify says not done, and it is sent once', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      const { id, log, deadPid } = await crashThenResume(url, 'sms:before-send', () => engine.start(smsAlert, { verify: 'lookup' }));
      const worker = await resume(engine);
      expect(await engine.result(id, { timeout: '30s' })).toEqual({ sent: true, by: 'call' });
      await worker.stop();
      const sms = readLog(log).filter((l) => l.event === 'sms');
      expect(sms).toHaveLength(1);
      expect(sms[0]?.pid).not.toBe(deadPid);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('an at-most-once step that nobody can verify is re-run when a person decides rerun on its approval: sent again, once, by the new worker', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      const t = await crashThenResume(url, 'sms:after-send', () => engine.start(smsAlert, { verify: 'unknown' }));
      const worker = await resume(engine);
      await waitForStatus(engine, t.id, 'waiting', 30_000);
      const [approval] = await engine.approvals({ taskId: t.id, status: 'pending' });
      expect(approval?.name).toBe('effect:send-sms');
      await expect(engine.decide(approval?.id as string, { approve: true, by: 'ops', data: { action: 'again' } })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      await engine.decide(approval?.id as string, { approve: true, by: 'ops', data: { action: 'rerun' }, idempotencyKey: 'r-1' });
      expect(await engine.result(t.id, { timeout: '30s' })).toEqual({ sent: true, by: 'call' });
      await worker.stop();
      // A repeat through the shorthand is the same decision (its key): nothing new is recorded.
      const again = await engine.decideEffect(t.id, 'send-sms', 'rerun', { by: 'ops', idempotencyKey: 'r-1' });
      expect(again.decisions).toHaveLength(1);
      const sms = readLog(t.log).filter((l) => l.event === 'sms');
      expect(sms).toHaveLength(2);
      expect(sms[0]?.pid).toBe(t.deadPid);
      expect(sms[1]?.pid).not.toBe(t.deadPid);
      expect(readLog(t.log).filter((l) => l.event === 'after')).toHaveLength(1);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('an at-most-once step that nobody can verify parks the task on a decision; skip and fail are decided by a person', async () => {
    const url = makeUrl();
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    try {
      const skipped = await crashThenResume(url, 'sms:after-send', () => engine.start(smsAlert, { verify: 'unknown' }));
      const failed = await crashThenResume(url, 'sms:after-send', () => engine.start(smsAlert, { verify: 'unknown' }));
      const worker = await resume(engine);
      for (const t of [skipped, failed]) {
        await waitForStatus(engine, t.id, 'waiting', 30_000);
        const why = await engine.explain(t.id);
        expect(why.wait).toMatchObject({ kind: 'approval', step: 'send-sms', name: 'effect:send-sms' });
        const [approval] = await engine.approvals({ taskId: t.id, status: 'pending' });
        expect(approval?.payload).toMatchObject({ step: 'send-sms', actions: ['rerun', 'skip', 'fail'], reason: 'the vendor has no delivery lookup' });
      }
      await engine.decideEffect(skipped.id, 'send-sms', 'skip', { result: { sent: true, by: 'operator' }, by: 'ops', idempotencyKey: 'd-1' });
      await engine.decideEffect(skipped.id, 'send-sms', 'skip', { result: { sent: true, by: 'operator' }, by: 'ops', idempotencyKey: 'd-1' });
      expect(await engine.result(skipped.id, { timeout: '30s' })).toEqual({ sent: true, by: 'operator' });
      await engine.decideEffect(failed.id, 'send-sms', 'fail', { by: 'ops' });
      await expect(engine.result(failed.id, { timeout: '30s' })).rejects.toMatchObject({ code: ERROR_CODES.TASK_FAILED });
      await worker.stop();
      // Each message went out once, in the worker that died; nothing re-sent it blindly.
      expect(
        readLog(skipped.log)
          .filter((l) => l.event === 'sms')
          .map((l) => l.pid),
      ).toEqual([skipped.deadPid]);
      expect(
        readLog(failed.log)
          .filter((l) => l.event === 'sms')
          .map((l) => l.pid),
      ).toEqual([failed.deadPid]);
      await expect(engine.decideEffect(skipped.id, 'send-sms', 'maybe' as 'skip')).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    } finally {
      await engine.close();
    }
  }, 120_000);
});
