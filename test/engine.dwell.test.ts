// Dwell timeouts (a workflow's `dwell` option): a task that stays waiting or paused past its bound
// is failed, cancelled or only alerted about, by the worker's one scanner, on the engine clock.
// Each is a `dwell:exceeded` entry in the task's log, apart from an approval's own timeout.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, InvalidArgumentError, workflow, type DwellEvent, type Engine, type TaskEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';

const dwellEvents = (history: TaskEvent[]): DwellEvent[] => history.filter((e): e is DwellEvent => e.type === 'dwell:exceeded');

/** Moves the engine clock a scan interval at a time until `check` holds (the scanner runs on the engine clock). */
async function advanceUntil(clock: ManualClock, check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await clock.advance('1s');
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`never reached: ${what}`);
}

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
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('23h');
    await new Promise((r) => setTimeout(r, 50));
    expect((await engine.get(id)).status).toBe('waiting');
    await clock.advance('1h');
    await advanceUntil(clock, statusIs(engine, id, 'failed'), 'the task failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.TIMEOUT, name: 'DwellTimeoutError' });
    expect(transitionsOf(info).at(-1)).toMatchObject({ event: 'expire', from: 'waiting', to: 'failed', actor: { kind: 'system', id: 'dwell-timeout' } });
    expect(dwellEvents(info.history)).toMatchObject([{ status: 'waiting', afterMs: 86_400_000, outcome: 'fail', actor: { kind: 'system', id: 'dwell-timeout' } }]);
    // The approval's own timeout did not fire: its record is still open, and the ended task takes no decision.
    expect(info.approvals[0]?.status).toBe('pending');
    expect(info.history.some((e) => e.type === 'approval:decided')).toBe(false);
    await expect(engine.decide(info.approvals[0]?.id as string, { approve: true, by: 'alice' })).rejects.toMatchObject({ code: ERROR_CODES.TASK_ENDED });
  });

  it('cancels a task paused longer than dwell.paused', async () => {
    const clock = new ManualClock();
    const wf = workflow('forgotten-pause', async (ctx) => ctx.waitForEvent('go'), { dwell: { paused: { after: '2h', then: 'cancel' } } });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
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
    const wf = workflow('slow-reviewers', async (ctx) => {
      await ctx.waitForEvent('first');
      return ctx.waitForEvent('second');
    }, { dwell: { waiting: { after: '1h', then: 'alert' } } });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 1, 'the first alert');
    for (let i = 0; i < 5; i++) await clock.advance('1s'); // more scans: no second alert for this stay
    await new Promise((r) => setTimeout(r, 50));
    expect(dwellEvents((await engine.get(id)).history)).toHaveLength(1);
    expect((await engine.get(id)).status).toBe('waiting');
    await engine.signal(id, 'first');
    await advanceUntil(clock, async () => (await engine.get(id)).wait?.event === 'second', 'the second wait');
    await clock.advance('1h');
    await advanceUntil(clock, async () => dwellEvents((await engine.get(id)).history).length === 2, 'the alert of the second stay');
    await engine.signal(id, 'second', 'done');
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ name: 'second', payload: 'done' });
  });

  it('refuses a dwell option it cannot enforce, naming the mistake', () => {
    expect(() => workflow('bad-dwell', async () => 1, { dwell: { running: { after: '1h', then: 'fail' } } as never })).toThrow(InvalidArgumentError);
    expect(() => workflow('bad-dwell', async () => 1, { dwell: { waiting: { after: '1h', then: 'explode' } } as never })).toThrow(/then must be 'fail', 'cancel' or 'alert'/);
  });
});
