// Dwell timeouts (a workflow's `dwell` option): a task that stays waiting or paused past its bound
// is failed, cancelled or only alerted about, by the worker's one scanner, on the engine clock.
// Each is a `dwell:exceeded` entry in the task's log, apart from an approval's own timeout.
import { describe, expect, it, onTestFinished } from 'vitest';
import { ERROR_CODES, InvalidArgumentError, openStore, workflow, type DwellEvent, type Engine, type EngineOptions, type TaskEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { advanceUntil, eventually, gate, makeEngine, startWorker, tempDbUrl, TEST_STORE, transitionsOf, waitForStatus } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const dwellEvents = (history: TaskEvent[]): DwellEvent[] => history.filter((e): e is DwellEvent => e.type === 'dwell:exceeded');

/**
 * An engine whose dwell scans are counted, and `scanned()`: waits until a whole scan ran after the
 * call (one started after it, and the next one too). Scans come every `dwellScanMs` of real time
 * (the bounds are on the engine clock, which stands still meanwhile).
 */
async function countingEngine(options: EngineOptions): Promise<{ engine: Engine; scanned: () => Promise<void> }> {
  const inner = await openStore(tempDbUrl());
  onTestFinished(() => inner.close());
  const boundStatuses = new Set<string>();
  let lists = 0;
  const store = spyStore(inner, {
    // The scanner lists each bounded status of each workflow once per scan.
    listTasks: (original) => async (q) => {
      if (q.workflow !== undefined && q.statuses?.length === 1) {
        boundStatuses.add(`${q.workflow}/${q.statuses[0]}`);
        lists++;
      }
      return original(q);
    },
  });
  const engine = makeEngine({ ...options, store });
  const scanned = async (): Promise<void> => {
    const from = lists;
    await eventually(() => boundStatuses.size > 0 && lists >= from + boundStatuses.size + 1, 10_000, 'a whole dwell scan');
  };
  return { engine, scanned };
}

/** Scans often, so that waiting for one takes little real time. */
const SCANS = { dwellScanMs: 50 };
/**
 * A lease no test outlives: these tests move the engine's clock by hours while runs go on in real
 * time, and on PostgreSQL leases expire on the database's clock; with a short lease a run slowed
 * by a busy machine lost it and was reclaimed mid-test.
 */
const LONG_LEASE = { leaseMs: 7 * 86_400_000 };

const statusIs = (engine: Engine, id: string, status: string) => async () => (await engine.get(id)).status === status;

describe('dwell timeouts', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it("fails a task that waits longer than dwell.waiting, with a dwell:exceeded entry apart from the approval's own (longer) timeout", async () => {
    const clock = new ManualClock();
    const wf = workflow('stuck-review', async (ctx) => ctx.approval('review', { approvers: ['alice'], timeout: '7d' }), {
      dwell: { waiting: { after: '1d', then: 'fail' } },
    });
    const { engine, scanned } = await countingEngine({ workflows: [wf], clock });
    await startWorker(engine, { ...LONG_LEASE, ...SCANS });
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('23h');
    await scanned();
    expect((await engine.get(id)).status).toBe('waiting');
    await clock.advance('1h');
    await advanceUntil(clock, statusIs(engine, id, 'failed'), 'the task failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    expect(transitionsOf(info).at(-1)).toMatchObject({ event: 'expire', from: 'waiting', to: 'failed', actor: { kind: 'system', id: 'dwell-timeout' } });
    expect(dwellEvents(info.history)).toMatchObject([{ status: 'waiting', afterMs: 86_400_000, outcome: 'fail', actor: { kind: 'system', id: 'dwell-timeout' } }]);
    // The approval's own timeout did not fire: its record is closed because the task ended, and the ended task takes no decision.
    await eventually(async () => (await engine.get(id)).approvals[0]?.status === 'expired', 10_000, 'the approval closed');
    const closed = await engine.get(id);
    expect(closed.approvals[0]?.outcome).toMatchObject({ approved: false, timedOut: false, taskEnded: 'failed' });
    expect(closed.history.filter((e) => e.type === 'approval:decided').map((e) => e.actor)).toEqual([{ kind: 'system', id: 'task-ended' }]);
    await expect(engine.decide(info.approvals[0]?.id as string, { approve: true, by: 'alice' })).rejects.toMatchObject({ code: ERROR_CODES.TASK_ENDED });
  });

  it('a task that waits too long with a compensated step completed: a worker replays it, runs the compensation and fails it with the dwell error', async () => {
    const clock = new ManualClock();
    const undone: string[] = [];
    const wf = workflow(
      'reserved-then-stuck',
      async (ctx) => {
        await ctx.step('reserve', () => 'R7', { compensate: (r: string) => void undone.push(r) });
        return ctx.waitForEvent('confirm');
      },
      { dwell: { waiting: { after: '1h', then: 'fail' } } },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, LONG_LEASE);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1h');
    await advanceUntil(clock, statusIs(engine, id, 'failed'), 'the task failed');
    const info = await engine.get(id);
    expect(undone).toEqual(['R7']);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    expect(info.steps.map((st) => `${st.name}:${st.status}`)).toContain('compensate:reserve:completed');
    // The scanner's expire leaves it waiting and due, with the error; the worker claims it and fails it.
    expect(
      transitionsOf(info)
        .map((t) => `${t.event}:${t.from}>${t.to}`)
        .slice(-3),
    ).toEqual(['expire:waiting>waiting', 'claim:waiting>running', 'fail:running>failed']);
    expect(dwellEvents(info.history)).toHaveLength(1);
  });

  it('a paused task past dwell.paused with a compensated step: it is made pending, and the worker that claims it compensates and fails it', async () => {
    const clock = new ManualClock();
    const undone: string[] = [];
    const wf = workflow(
      'reserved-then-paused',
      async (ctx) => {
        await ctx.step('reserve', () => 'R8', { compensate: (r: string) => void undone.push(r) });
        return ctx.waitForEvent('confirm');
      },
      { dwell: { paused: { after: '2h', then: 'fail' } } },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, LONG_LEASE);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await engine.pause(id);
    await clock.advance('2h');
    await advanceUntil(clock, statusIs(engine, id, 'failed'), 'the task failed');
    const info = await engine.get(id);
    expect(undone).toEqual(['R8']);
    expect(info.status === 'failed' && info.error).toMatchObject({ name: 'DwellTimeoutError' });
    expect(
      transitionsOf(info)
        .map((t) => `${t.event}:${t.from}>${t.to}`)
        .slice(-3),
    ).toEqual(['expire:paused>pending', 'claim:pending>running', 'fail:running>failed']);
  });

  it('cancels a task paused longer than dwell.paused', async () => {
    const clock = new ManualClock();
    const wf = workflow('forgotten-pause', async (ctx) => ctx.waitForEvent('go'), { dwell: { paused: { after: '2h', then: 'cancel' } } });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, LONG_LEASE);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await engine.pause(id, { by: 'ops' });
    await clock.advance('2h');
    await advanceUntil(clock, statusIs(engine, id, 'cancelled'), 'the task cancelled');
    const info = await engine.get(id);
    expect(info.cancelReason).toBe('stayed paused longer than 7200000ms (dwell.paused)');
    expect(dwellEvents(info.history)).toMatchObject([{ status: 'paused', outcome: 'cancel' }]);
  });

  it('an alert only records one dwell:exceeded entry per stay and leaves the task waiting; a new stay can alert again', async () => {
    const clock = new ManualClock();
    const wf = workflow(
      'slow-reviewers',
      async (ctx) => {
        await ctx.waitForEvent('first');
        return ctx.waitForEvent('second');
      },
      { dwell: { waiting: { after: '1h', then: 'alert' } } },
    );
    const { engine, scanned } = await countingEngine({ workflows: [wf], clock });
    await startWorker(engine, { ...LONG_LEASE, ...SCANS });
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 1, 'the first alert');
    await scanned(); // more scans: no second alert for this stay
    await scanned();
    expect(dwellEvents((await engine.get(id)).history)).toHaveLength(1);
    expect((await engine.get(id)).status).toBe('waiting');
    await engine.signal(id, 'first');
    await advanceUntil(clock, async () => (await engine.get(id)).wait?.event === 'second', 'the second wait');
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 2, 'the alert of the second stay');
    await engine.signal(id, 'second', 'done');
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ name: 'second', payload: 'done' });
  });

  // Leases far longer than the clock moves here, so that only the dwell bound can stop a run.

  it('fails a task running longer than dwell.running without progress; a progress report restarts the bound', async () => {
    const clock = new ManualClock();
    const report = gate();
    const wf = workflow(
      'stalled-crawl',
      async (ctx) => {
        await ctx.step('warm-up', async () => 'ok');
        return ctx.step('crawl', async (s) => {
          await report.promise;
          s.progress({ done: 1, total: 10 });
          // Stalls: waits until the run is stopped.
          await new Promise((_, reject) => s.signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true }));
        });
      },
      { dwell: { running: { after: '10m', then: 'fail' } } },
    );
    const { engine, scanned } = await countingEngine({ workflows: [wf], clock });
    await startWorker(engine, { ...LONG_LEASE, ...SCANS });
    const { id } = await engine.start(wf);
    await eventually(async () => (await engine.get(id)).steps.some((st) => st.name === 'warm-up' && st.status === 'completed'), 10_000, 'the first step');
    await clock.advance('9m');
    report.open();
    await eventually(async () => (await engine.get(id)).progress?.done === 1, 10_000, 'the progress report');
    const reportedAt = clock.now();
    await clock.advance('9m'); // 18 minutes running, but 9 since the report
    await scanned();
    expect((await engine.get(id)).status).toBe('running');
    await clock.advance('1m');
    await advanceUntil(clock, statusIs(engine, id, 'failed'), 'the stalled task failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    // The scanner writes the failure and fences the stalled run off (expire); the worker that reclaims
    // the task fails it at its start.
    expect(
      transitionsOf(info)
        .slice(-3)
        .map((t) => [t.event, t.from, t.to, t.actor?.kind === 'system' ? t.actor.id : 'worker']),
    ).toEqual([
      ['expire', 'running', 'running', 'dwell-timeout'],
      ['reclaim', 'running', 'running', 'worker'],
      ['fail', 'running', 'failed', 'worker'],
    ]);
    expect(dwellEvents(info.history)).toMatchObject([{ status: 'running', afterMs: 600_000, since: reportedAt, outcome: 'fail' }]);
  });

  it('cancels a run stalled longer than dwell.running, aborting the step like a user cancel', async () => {
    const clock = new ManualClock();
    let aborted = false;
    const wf = workflow(
      'stalled-call',
      async (ctx) =>
        ctx.step('call', async (s) => {
          await new Promise((_, reject) =>
            s.signal.addEventListener(
              'abort',
              () => {
                aborted = true;
                reject(new Error('aborted'));
              },
              { once: true },
            ),
          );
        }),
      { dwell: { running: { after: '5m', then: 'cancel' } } },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, LONG_LEASE);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'running');
    await clock.advance('5m');
    await advanceUntil(clock, statusIs(engine, id, 'cancelled'), 'the stalled task cancelled');
    const info = await engine.get(id);
    expect(aborted).toBe(true);
    expect(info.cancelReason).toBe('ran longer than 300000ms without progress (dwell.running)');
    expect(transitionsOf(info).map((t) => t.event)).toContain('cancel');
    expect(dwellEvents(info.history)).toMatchObject([{ status: 'running', outcome: 'cancel' }]);
  });

  it('alerts once per stall of a running task; a finished step ends the stall and a new one can alert again', async () => {
    const clock = new ManualClock();
    const first = gate();
    const second = gate();
    const wf = workflow(
      'slow-steps',
      async (ctx) => {
        await ctx.step('one', async () => first.promise);
        await ctx.step('two', async () => second.promise);
        return 'done';
      },
      { dwell: { running: { after: '1h', then: 'alert' } } },
    );
    const { engine, scanned } = await countingEngine({ workflows: [wf], clock });
    await startWorker(engine, { ...LONG_LEASE, ...SCANS });
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'running');
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 1, 'the first alert');
    await scanned(); // more scans: no second alert for this stall
    await scanned();
    expect(dwellEvents((await engine.get(id)).history)).toHaveLength(1);
    first.open();
    await eventually(async () => (await engine.get(id)).steps.some((st) => st.name === 'one' && st.status === 'completed'), 10_000, 'step one');
    const oneDone = (await engine.get(id)).steps.find((st) => st.name === 'one')?.finishedAt;
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 2, 'the alert of the second stall');
    const alerts = dwellEvents((await engine.get(id)).history);
    expect(alerts[1]).toMatchObject({ status: 'running', outcome: 'alert', since: oneDone });
    expect((await engine.get(id)).status).toBe('running');
    second.open();
    expect(await engine.result(id, { timeout: '20s' })).toBe('done');
  });

  it('refuses a dwell option it cannot enforce, naming the mistake', () => {
    expect(() => workflow('bad-dwell', async () => 1, { dwell: { stuck: { after: '1h', then: 'fail' } } as never })).toThrow(InvalidArgumentError);
    expect(() => workflow('bad-dwell', async () => 1, { dwell: { stuck: { after: '1h', then: 'fail' } } as never })).toThrow(/dwell.stuck is not a bound/);
    expect(() => workflow('bad-dwell', async () => 1, { dwell: { waiting: { after: '1h', then: 'explode' } } as never })).toThrow(/then must be 'fail', 'cancel' or 'alert'/);
  });
});
