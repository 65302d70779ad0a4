// The cleanup scope across a SIGKILLed worker (real processes), on SQLite and PostgreSQL: a worker
// dies in the middle of an onCancel handler, of a compensation (after a cancel, after a failure for
// good), or after the cleanup but before the task's last transition. The worker that takes the task
// over (still `cancelling` after a cancel) hands back what the first cleanup recorded — each cleanup
// call is found by its name within the cleanup, not by the code's positions — and runs the rest.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, type TaskInfo, type Worker } from '../src/index.ts';
import { cancelCleanup, cleanupSaga, stallSaga } from './fixtures/cleanup-workflows.ts';
import { FAST, eventually, schemasOfThisFile, tempDir, transitionsOf, waitForStatus } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { readLog, spawnCli, type LogLine } from './support/processes.ts';

const FIXTURE = 'test/fixtures/cleanup-workflows.ts';
const WORKFLOWS = [cancelCleanup, cleanupSaga, stallSaga];
const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_cleanup');

const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'cleanup.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL crash tests of the cleanup scope are skipped.');

interface Crash {
  engine: Engine;
  id: string;
  log: string;
  /** The pid of the worker that died. */
  dead: number;
}

/**
 * Starts a task, runs it on a worker process told to SIGKILL itself at `killAt` (cancelling the
 * task once its `work` step has started, if `cancel`; once it has parked, if `'when-waiting'`),
 * and waits for that death.
 */
async function crash(url: string, killAt: string, start: (engine: Engine) => Promise<{ id: string }>, cancel: boolean | 'when-waiting'): Promise<Crash> {
  const log = join(tempDir(), 'effects.log');
  // The worker in this process (the one that takes over) records its effects in the same file.
  process.env.STEPWISE_TEST_LOG = log;
  const engine = new Engine({ store: url, workflows: WORKFLOWS });
  const { id } = await start(engine);
  const a = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log, STEPWISE_TEST_KILL_AT: killAt });
  if (cancel === 'when-waiting') {
    // Parked: no worker holds it; the cancel goes through cancelling and worker A reclaims it.
    await waitForStatus(engine, id, 'waiting', 30_000);
    expect((await engine.cancel(id, { reason: 'user asked' })).status).toBe('cancelling');
  } else if (cancel) {
    await eventually(() => readLog(log).some((l) => l.event === 'work-start'), 30_000, 'worker A to start the work step');
    await engine.cancel(id, { reason: 'user asked' });
  }
  const exit = await a.exited;
  expect(exit.signal, `worker A should die at ${killAt}; its output:\n${a.output()}`).toBe('SIGKILL');
  return { engine, id, log, dead: a.pid };
}

/**
 * The worker that takes the task over, in this process. Its lease is long (the dead worker's was
 * 1.5 s): on a loaded machine a heartbeat delayed past a short lease would make it give the task
 * up and take it again, and the test is about the dead worker's cleanup, not about that.
 */
async function takeOver(engine: Engine): Promise<Worker> {
  const w = engine.worker({ ...FAST, leaseMs: 10_000 });
  await w.start();
  return w;
}

/** Who did `event` (pids) and with which idempotency keys. */
function did(lines: LogLine[], event: string): Array<[number, string]> {
  return lines.filter((l) => l.event === event).map((l) => [l.pid, l.key]);
}

function stepNames(info: TaskInfo): string[] {
  return info.steps.map((s) => `${s.name}:${s.status}`);
}

describe.each(stores)('the cleanup scope across a SIGKILL on $name (real processes)', ({ url: makeUrl }) => {
  it('a worker killed in the middle of the second step of an onCancel handler: the next worker replays the first and reruns the second; the task ends cancelled', async () => {
    const { engine, id, log, dead } = await crash(makeUrl(), 'flush-queue', (e) => e.start(cancelCleanup), true);
    const me = process.pid;
    try {
      expect((await engine.get(id)).status).toBe('cancelling');
      const worker = await takeOver(engine);
      await waitForStatus(engine, id, ['cancelled', 'failed'], 30_000);
      await worker.stop();
      const info = await engine.get(id);
      expect(info.status, JSON.stringify(info.status === 'failed' ? info.error : null)).toBe('cancelled');
      const lines = readLog(log);
      // The first cleanup step ran once; its recorded result was handed back to the second run.
      expect(did(lines, 'release-lock')).toEqual([[dead, `v1:${id}:onCancel:release-lock#1`]]);
      expect(info.steps.find((s) => s.name === 'onCancel:release-lock')).toMatchObject({ status: 'completed', output: 'released: user asked' });
      // The interrupted one ran again, with the same key, and completed; the compensation ran once.
      expect(did(lines, 'flush-start')).toEqual([
        [dead, `v1:${id}:onCancel:flush-queue#1`],
        [me, `v1:${id}:onCancel:flush-queue#1`],
      ]);
      expect(did(lines, 'flush')).toEqual([[me, `v1:${id}:onCancel:flush-queue#1`]]);
      expect(did(lines, 'compensate')).toEqual([[me, `v1:${id}:compensate:book#1`]]);
      // The work step ran in the first worker only; the code's call after its late result was refused in both runs.
      expect(did(lines, 'work-start').map(([pid]) => pid)).toEqual([dead]);
      expect(did(lines, 'log-stop')).toEqual([]);
      expect(stepNames(info)).toEqual(['book:completed', 'onCancel:release-lock:completed', 'onCancel:flush-queue:completed', 'compensate:book:completed']);
      expect(
        transitionsOf(info)
          .map((t) => `${t.event}:${t.from}->${t.to}`)
          .slice(-3),
      ).toEqual(['cancel:running->cancelling', 'reclaim:cancelling->cancelling', 'abort:cancelling->cancelled']);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('a worker killed in the middle of a compensation after a failure for good: the next worker reruns it, then the others; the task fails with its own error', async () => {
    const { engine, id, log, dead } = await crash(makeUrl(), 'compensate', (e) => e.start(cleanupSaga, { end: 'fail' }), false);
    const me = process.pid;
    try {
      expect((await engine.get(id)).status).toBe('running');
      const worker = await takeOver(engine);
      await waitForStatus(engine, id, ['failed', 'cancelled'], 30_000);
      await worker.stop();
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error).toMatchObject({ code: 'STEP_FAILED', message: expect.stringMatching(/card declined/) });
      const lines = readLog(log);
      expect(did(lines, 'compensate-start')).toEqual([
        [dead, `v1:${id}:compensate:book#1`],
        [me, `v1:${id}:compensate:book#1`],
      ]);
      expect(did(lines, 'compensate')).toEqual([
        [me, `v1:${id}:compensate:book#1`],
        [me, `v1:${id}:compensate:reserve#1`],
      ]);
      expect(did(lines, 'notify')).toEqual([]); // not cancelled: no onCancel handler runs
      expect(stepNames(info)).toEqual(['reserve:completed', 'book:completed', 'pay:failed', 'compensate:book:completed', 'compensate:reserve:completed']);
      expect(
        transitionsOf(info)
          .map((t) => t.event)
          .slice(-2),
      ).toEqual(['reclaim', 'fail']);
    } finally {
      await engine.close();
    }
  }, 90_000);

  // Cancelled while it ran (its `work` step), or while it waited (parked: the cancel goes through
  // cancelling, and worker A reclaims it to run the cleanup).
  it.each([
    { when: 'while it ran', end: 'cancel' as const, cancel: true as const, log: ['cancel:running->cancelling', 'reclaim:cancelling->cancelling', 'abort:cancelling->cancelled'] },
    {
      when: 'while it waited',
      end: 'wait' as const,
      cancel: 'when-waiting' as const,
      log: ['cancel:waiting->cancelling', 'reclaim:cancelling->cancelling', 'reclaim:cancelling->cancelling', 'abort:cancelling->cancelled'],
    },
  ])(
    'a worker killed in the middle of a compensation of a task cancelled $when the next worker keeps the onCancel step it recorded, reruns the compensation, runs the rest; the task ends cancelled',
    async ({ end, cancel, log: transitions }) => {
      const { engine, id, log, dead } = await crash(makeUrl(), 'compensate', (e) => e.start(cleanupSaga, { end }), cancel);
      const me = process.pid;
      try {
        expect((await engine.get(id)).status).toBe('cancelling');
        const worker = await takeOver(engine);
        await waitForStatus(engine, id, ['cancelled', 'failed'], 30_000);
        await worker.stop();
        const info = await engine.get(id);
        expect(info.status, JSON.stringify(info.status === 'failed' ? info.error : null)).toBe('cancelled');
        const lines = readLog(log);
        expect(did(lines, 'notify')).toEqual([[dead, `v1:${id}:onCancel:notify#1`]]);
        expect(did(lines, 'compensate-start')).toEqual([
          [dead, `v1:${id}:compensate:book#1`],
          [me, `v1:${id}:compensate:book#1`],
        ]);
        expect(did(lines, 'compensate')).toEqual([
          [me, `v1:${id}:compensate:book#1`],
          [me, `v1:${id}:compensate:reserve#1`],
        ]);
        expect(did(lines, 'work-start').map(([pid]) => pid)).toEqual(end === 'cancel' ? [dead] : []);
        expect(stepNames(info).filter((n) => !n.startsWith('go:'))).toEqual([
          'reserve:completed',
          'book:completed',
          'onCancel:notify:completed',
          'compensate:book:completed',
          'compensate:reserve:completed',
        ]);
        expect(
          transitionsOf(info)
            .map((t) => `${t.event}:${t.from}->${t.to}`)
            .slice(-transitions.length),
        ).toEqual(transitions);
      } finally {
        await engine.close();
      }
    },
    90_000,
  );

  it('a worker killed in the middle of a compensation of a re-run that undoes first: the next worker reruns it, then the others, each once; the task runs again from its step under new keys', async () => {
    const url = makeUrl();
    const log = join(tempDir(), 'effects.log');
    process.env.STEPWISE_TEST_LOG = log;
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    const me = process.pid;
    try {
      const { id } = await engine.start(cleanupSaga, { end: 'succeed' });
      const first = await takeOver(engine);
      await waitForStatus(engine, id, 'succeeded', 30_000);
      await first.stop();
      await engine.retry(id, { fromStep: 'reserve', compensate: true });
      const a = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log, STEPWISE_TEST_KILL_AT: 'compensate' });
      const exit = await a.exited;
      expect(exit.signal, `worker A should die in the compensation; its output:\n${a.output()}`).toBe('SIGKILL');
      expect((await engine.get(id)).status).toBe('running');
      const worker = await takeOver(engine);
      await waitForStatus(engine, id, ['succeeded', 'failed'], 30_000);
      await worker.stop();
      const info = await engine.get(id);
      expect(info.status, JSON.stringify(info.status === 'failed' ? info.error : null)).toBe('succeeded');
      const lines = readLog(log);
      expect(did(lines, 'compensate-start')).toEqual([
        [a.pid, `v1:${id}:compensate:book#1`],
        [me, `v1:${id}:compensate:book#1`],
      ]);
      expect(did(lines, 'compensate')).toEqual([
        [me, `v1:${id}:compensate:book#1`],
        [me, `v1:${id}:compensate:reserve#1`],
      ]);
      // Run once before the re-run, and once after the undo under new keys.
      expect(did(lines, 'reserve')).toEqual([
        [me, `v1:${id}:reserve#1`],
        [me, `v1:${id}:reserve#1:redo1`],
      ]);
      expect(did(lines, 'book')).toEqual([
        [me, `v1:${id}:book#1`],
        [me, `v1:${id}:book#1:redo1`],
      ]);
      expect(stepNames(info)).toEqual(['reserve:completed', 'book:completed']);
      expect(
        transitionsOf(info)
          .map((t) => `${t.event}:${t.from}->${t.to}`)
          .slice(-6),
      ).toEqual(['retry:succeeded->pending', 'claim:pending->running', 'reclaim:running->running', 'release:running->pending', 'claim:pending->running', 'complete:running->succeeded']);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('dwell.running fails a task whose worker stalled (then was killed): the worker that takes it over fails it at its start, after running its compensation', async () => {
    const url = makeUrl();
    const log = join(tempDir(), 'effects.log');
    process.env.STEPWISE_TEST_LOG = log;
    const engine = new Engine({ store: url, workflows: WORKFLOWS });
    const me = process.pid;
    try {
      const a = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '60000', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log, STEPWISE_TEST_SPIN: '1' });
      const { id } = await engine.start(stallSaga);
      await eventually(() => readLog(log).some((l) => l.event === 'crawl-start'), 30_000, 'worker A to stall in its step');
      // This process's worker scans the dwell bounds; it cannot take the task while A's lease lasts.
      const worker = engine.worker({ ...FAST, leaseMs: 10_000, dwellScanMs: 50 });
      await worker.start();
      // The scanner fences A's run off: this worker takes the task over at once, whatever A does.
      await eventually(async () => transitionsOf(await engine.get(id)).some((t) => t.event === 'expire'), 30_000, 'the dwell failure');
      process.kill(a.pid, 'SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');
      await waitForStatus(engine, id, ['failed', 'succeeded', 'cancelled'], 30_000);
      await worker.stop();
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error).toMatchObject({ name: 'DwellTimeoutError' });
      const lines = readLog(log);
      expect(did(lines, 'reserve')).toEqual([[a.pid, `v1:${id}:reserve#1`]]);
      expect(did(lines, 'compensate')).toEqual([[me, `v1:${id}:compensate:reserve#1`]]);
      // The step ran in A only: the run that took over failed at its start and made no new call.
      expect(did(lines, 'crawl-start').map(([pid]) => pid)).toEqual([a.pid]);
      expect(
        transitionsOf(info)
          .map((t) => `${t.event}:${t.from}->${t.to}`)
          .slice(-3),
      ).toEqual(['expire:running->running', 'reclaim:running->running', 'fail:running->failed']);
    } finally {
      await engine.close();
    }
  }, 90_000);

  it('a worker killed after the cleanup, before the last transition: the next worker runs no cleanup step again and ends the task cancelled', async () => {
    const { engine, id, log, dead } = await crash(makeUrl(), 'cleanup:done', (e) => e.start(cleanupSaga, { end: 'cancel' }), true);
    try {
      const before = await engine.get(id);
      expect(before.status).toBe('cancelling');
      expect(stepNames(before)).toEqual(['reserve:completed', 'book:completed', 'onCancel:notify:completed', 'compensate:book:completed', 'compensate:reserve:completed']);
      const worker = await takeOver(engine);
      await waitForStatus(engine, id, ['cancelled', 'failed'], 30_000);
      await worker.stop();
      const info = await engine.get(id);
      expect(info.status).toBe('cancelled');
      const lines = readLog(log);
      for (const event of ['notify', 'compensate-start']) expect(did(lines, event).map(([pid]) => pid)).toEqual([dead]);
      expect(did(lines, 'compensate').map(([pid, key]) => [pid, key.slice(key.lastIndexOf(':') + 1)])).toEqual([
        [dead, 'book#1'],
        [dead, 'reserve#1'],
      ]);
      expect(stepNames(info)).toEqual(stepNames(before));
      expect(
        transitionsOf(info)
          .map((t) => t.event)
          .slice(-2),
      ).toEqual(['reclaim', 'abort']);
    } finally {
      await engine.close();
    }
  }, 90_000);
});
