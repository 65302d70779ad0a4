// Schedules: each cron tick starts exactly one task, however many workers fire it, with catch-up of
// missed ticks within a window, overlap policies, and ticks that stay fired after retention.
import { describe, expect, it } from 'vitest';
import { Engine, isStepwiseError, workflow, type ScheduleOverlap } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl } from './support/engine.ts';

const T0 = Date.UTC(2030, 0, 1, 0, 0, 30); // 30 s past a minute
const MINUTE = 60_000;
const SCAN = { scheduleScanMs: 10 };

function report(seen: Array<{ scheduledAt: number | null; input: unknown }>) {
  return workflow('report', async (ctx, input: unknown) => {
    seen.push({ scheduledAt: ctx.scheduledAt?.getTime() ?? null, input });
    return ctx.scheduledAt?.toISOString() ?? null;
  });
}

async function tasksOf(engine: Engine): Promise<Array<{ id: string; key: string | null; status: string }>> {
  const { tasks } = await engine.list({ limit: 1000 });
  return tasks.map((t) => ({ id: t.id, key: t.idempotencyKey, status: t.status }));
}

describe('schedules', () => {
  it('starts one task per tick with ctx.scheduledAt, and catches up the ticks missed within the window', async () => {
    const clock = new ManualClock(T0);
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const engine = makeEngine({ workflows: [report(seen)], clock });
    const created = await engine.schedules.create({ id: 'every-minute', workflow: 'report', cron: '* * * * *', input: { region: 'eu' }, overlap: 'allow' });
    expect(created).toMatchObject({ created: true, nextRunAt: T0 + 30_000, timezone: 'UTC', overlap: 'allow', catchupMs: 3_600_000, paused: false });
    await startWorker(engine, SCAN);
    await clock.advance(30_000); // the first tick is due
    await eventually(() => seen.length === 1, 10_000, 'the first tick');
    expect(seen[0]).toEqual({ scheduledAt: T0 + 30_000, input: { region: 'eu' } });
    // The worker was away for three minutes: the three missed ticks each start once, in order.
    await clock.advance(3 * MINUTE);
    await eventually(() => seen.length === 4, 10_000, 'the missed ticks');
    expect(seen.map((s) => s.scheduledAt)).toEqual([1, 2, 3, 4].map((i) => T0 + 30_000 + (i - 1) * MINUTE));
    const info = await engine.schedules.get('every-minute');
    expect(info).toMatchObject({ lastRunAt: T0 + 30_000 + 3 * MINUTE, nextRunAt: T0 + 30_000 + 4 * MINUTE, skipped: 0 });
    expect(new Set((await tasksOf(engine)).map((t) => t.key)).size).toBe(4);
  });

  it('fires each tick once with two engines (two processes’ workers) racing for it', async () => {
    const clock = new ManualClock(T0);
    const url = tempDbUrl();
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const a = new Engine({ store: url, workflows: [report(seen)], clock });
    const b = new Engine({ store: url, workflows: [report(seen)], clock });
    try {
      await a.schedules.create({ id: 'race', workflow: 'report', cron: '*/10 * * * * *', overlap: 'allow' }); // every 10 s
      await startWorker(a, SCAN);
      await startWorker(b, SCAN);
      for (let i = 0; i < 12; i++) {
        await clock.advance('10s');
        await eventually(async () => (await a.schedules.get('race')).nextRunAt! > clock.now(), 10_000, `tick ${i}`);
      }
      await eventually(() => seen.length >= 12, 10_000, 'twelve ticks');
      const tasks = await tasksOf(a);
      expect(tasks).toHaveLength(12);
      expect(new Set(seen.map((s) => s.scheduledAt)).size).toBe(12);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('skips ticks missed beyond the catch-up window and counts them; catchup: false fires only ticks on time', async () => {
    const clock = new ManualClock(Date.UTC(2030, 0, 1, 0, 0, 0));
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const engine = makeEngine({ workflows: [report(seen)], clock });
    await engine.schedules.create({ id: 'hourly', workflow: 'report', cron: '0 * * * *', catchup: '90m', overlap: 'allow', input: 'hourly' });
    await engine.schedules.create({ id: 'strict', workflow: 'report', cron: '0 * * * *', catchup: false, input: 'strict' });
    await clock.advance('5h'); // no worker ran for five hours
    await startWorker(engine, SCAN);
    await eventually(async () => (await engine.schedules.get('hourly')).nextRunAt === Date.UTC(2030, 0, 1, 6), 10_000, 'hourly to catch up');
    await eventually(async () => (await engine.schedules.get('strict')).nextRunAt === Date.UTC(2030, 0, 1, 6), 10_000, 'strict to skip');
    await eventually(() => seen.length === 3, 10_000, 'three tasks');
    const hourly = seen.filter((s) => s.input === 'hourly').map((s) => new Date(s.scheduledAt!).getUTCHours());
    expect(hourly).toEqual([4, 5]); // 03:30 is the window's start: ticks at 04:00 and 05:00 fire
    expect((await engine.schedules.get('hourly')).skipped).toBe(3);
    // 05:00 is exactly now: a tick on time fires even without catch-up.
    expect(seen.filter((s) => s.input === 'strict').map((s) => new Date(s.scheduledAt!).getUTCHours())).toEqual([5]);
    expect((await engine.schedules.get('strict')).skipped).toBe(4);
  });

  it('does not fire a tick again once its task was deleted (retention)', async () => {
    const clock = new ManualClock(T0);
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const engine = makeEngine({ workflows: [report(seen)], clock });
    await engine.schedules.create({ id: 'daily', workflow: 'report', cron: '0 0 * * *', catchup: '7d' });
    await clock.set(Date.UTC(2030, 0, 2, 0, 0, 1));
    const worker = await startWorker(engine, SCAN);
    await eventually(() => seen.length === 1, 10_000, 'the first day');
    const [task] = await tasksOf(engine);
    await engine.result(task!.id);
    await engine.delete(task!.id);
    // A new worker (as after a deploy) scans again: the tick of 2 January stays fired.
    await worker.stop();
    const again = await startWorker(engine, SCAN);
    const scans = (await engine.schedules.get('daily')).updatedAt;
    await clock.advance('1h');
    await engine.schedules.trigger('daily'); // a scan-independent marker: one task started by hand
    await eventually(() => seen.length === 2, 10_000, 'the manual run');
    expect(seen[1]!.scheduledAt).toBe(clock.now());
    expect((await engine.schedules.get('daily')).nextRunAt).toBe(Date.UTC(2030, 0, 3));
    expect(scans).toBeGreaterThan(0);
    expect((await tasksOf(engine)).filter((t) => t.key?.endsWith(`:${Date.UTC(2030, 0, 2)}`))).toEqual([]);
    await clock.set(Date.UTC(2030, 0, 3, 0, 0, 1));
    await eventually(() => seen.length === 3, 10_000, 'the second day');
    expect(seen.map((s) => s.scheduledAt)).toEqual([Date.UTC(2030, 0, 2), Date.UTC(2030, 0, 2, 1, 0, 1), Date.UTC(2030, 0, 3)]);
    await again.stop();
  });

  describe('overlap with the task of the last tick still running', () => {
    async function run(overlap: ScheduleOverlap): Promise<{ engine: Engine; clock: ManualClock; started: string[]; release: () => Promise<void> }> {
      const clock = new ManualClock(T0);
      const started: string[] = [];
      const slow = workflow('slow', async (ctx) => {
        await ctx.step('mark', () => void started.push(ctx.scheduledAt!.toISOString().slice(14, 19)));
        await ctx.waitForEvent('done');
      });
      const engine = makeEngine({ workflows: [slow], clock });
      await engine.schedules.create({ id: `o-${overlap}`, workflow: 'slow', cron: '* * * * *', overlap });
      await startWorker(engine, SCAN);
      const release = async (): Promise<void> => {
        // Every unfinished task (a signal is kept for a task that does not wait yet).
        for (const t of await tasksOf(engine)) if (!['succeeded', 'failed', 'cancelled'].includes(t.status)) await engine.signal(t.id, 'done');
      };
      return { engine, clock, started, release };
    }
    const tickDone = async (engine: Engine, id: string, clock: ManualClock): Promise<void> =>
      eventually(async () => (await engine.schedules.get(id)).nextRunAt! > clock.now(), 10_000, 'the tick to be handled');
    /**
     * The first tick's task has recorded its step and parked: moving the clock by minutes while it
     * still runs would expire its lease (on the engine's clock) and run its step again elsewhere.
     */
    const firstParked = async (engine: Engine): Promise<void> => eventually(async () => (await tasksOf(engine)).some((t) => t.status === 'waiting'), 10_000, 'the first task to park');

    it("'skip' skips a tick while the last one runs, and counts it", async () => {
      const { engine, clock, started } = await run('skip');
      await clock.advance('30s');
      await eventually(() => started.length === 1, 10_000, 'the first tick');
      await firstParked(engine);
      await clock.advance('1m');
      await tickDone(engine, 'o-skip', clock);
      expect((await engine.schedules.get('o-skip')).skipped).toBe(1);
      expect(await tasksOf(engine)).toHaveLength(1);
    });

    it("'allow' starts the next tick beside the running one", async () => {
      const { engine, clock, started } = await run('allow');
      await clock.advance('30s');
      await clock.advance('1m');
      await eventually(() => started.length === 2, 10_000, 'two ticks');
      expect(await tasksOf(engine)).toHaveLength(2);
    });

    it("'cancel' cancels the running task, with a reason naming the tick, and starts the next", async () => {
      const { engine, clock, started } = await run('cancel');
      await clock.advance('30s');
      await eventually(() => started.length === 1, 10_000, 'the first tick');
      const [first] = await tasksOf(engine);
      // The first task has parked on its event: the cancel lands on a task at rest. Its step's row
      // alone is no sign of that (it may be written a turn after its result, before the park): a
      // run still going when the clock moves a minute loses its two-second lease, and the
      // cancelling task then waits for a poll on the engine's clock, which this test does not move.
      await firstParked(engine);
      expect((await engine.get(first!.id)).steps.some((x) => x.name === 'mark' && x.status === 'completed')).toBe(true);
      await clock.advance('1m');
      await eventually(() => started.length === 2, 10_000, 'the second tick');
      await eventually(async () => (await engine.get(first!.id)).status === 'cancelled', 10_000, 'the first to be cancelled');
      expect((await engine.get(first!.id)).cancelReason ?? JSON.stringify((await engine.get(first!.id)).history)).toContain("overlap: 'cancel'");
    });

    it("'buffer' holds one tick until the running task ends, and skips later ones meanwhile", async () => {
      const { engine, clock, started, release } = await run('buffer');
      await clock.advance('30s');
      await eventually(() => started.length === 1, 10_000, 'the first tick');
      await firstParked(engine);
      await clock.advance('1m');
      await tickDone(engine, 'o-buffer', clock);
      await clock.advance('1m');
      await tickDone(engine, 'o-buffer', clock);
      const held = await engine.schedules.get('o-buffer');
      expect(held).toMatchObject({ bufferedAt: T0 + 30_000 + MINUTE, skipped: 1 });
      expect(started).toHaveLength(1);
      await release();
      await eventually(() => started.length === 2, 10_000, 'the buffered tick');
      expect(started).toEqual(['01:00', '02:00']);
      // The buffered task is started, then the schedule's buffer emptied (two writes): the task may
      // run before the second commits.
      await eventually(async () => (await engine.schedules.get('o-buffer')).bufferedAt === null, 10_000, 'the buffer emptied');
    });
  });

  it('pauses, resumes from the next tick, lists, triggers by hand and deletes; unknown ids are NOT_FOUND', async () => {
    const clock = new ManualClock(T0);
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const engine = makeEngine({ workflows: [report(seen)], clock });
    await engine.schedules.create({ id: 'b', workflow: 'report', cron: '0 9 * * 1-5', timezone: 'Europe/Berlin' });
    await engine.schedules.create({ id: 'a', workflow: report(seen), cron: '*/5 * * * *', paused: true });
    expect((await engine.schedules.list()).map((s) => [s.id, s.paused, s.nextRunAt])).toEqual([
      ['a', true, null],
      ['b', false, Date.UTC(2030, 0, 1, 8)], // 09:00 in Berlin (UTC+1 in winter), 1 January 2030 is a Tuesday
    ]);
    await startWorker(engine, SCAN);
    await clock.advance('1h');
    const resumed = await engine.schedules.resume('a');
    expect(resumed).toMatchObject({ paused: false, nextRunAt: Date.UTC(2030, 0, 1, 1, 5) }); // the ticks of the pause are not fired
    await engine.schedules.pause('a');
    const { taskId } = await engine.schedules.trigger('a');
    expect(await engine.result(taskId)).toBe(new Date(clock.now()).toISOString());
    expect(await engine.schedules.delete('a')).toEqual({ deleted: true });
    expect(await engine.schedules.delete('a')).toEqual({ deleted: false });
    for (const call of [() => engine.schedules.get('a'), () => engine.schedules.pause('nope'), () => engine.schedules.resume('nope'), () => engine.schedules.trigger('nope')]) {
      const e = await call().catch((x: unknown) => x);
      expect(isStepwiseError(e, 'NOT_FOUND')).toBe(true);
    }
  });

  it('refuses a bad definition with INVALID_ARGUMENT naming the option, and a different definition under an existing id with CONFLICT', async () => {
    const engine = makeEngine({ workflows: [report([])] });
    const refused = async (o: object): Promise<string> => {
      const e = await engine.schedules.create(o as never).catch((x: unknown) => x);
      expect(isStepwiseError(e, 'INVALID_ARGUMENT')).toBe(true);
      return (e as Error).message;
    };
    expect(await refused({ id: 'x', workflow: 'report', cron: '61 * * * *' })).toMatch(/cron "61 \* \* \* \*" is not valid: .*minute/);
    expect(await refused({ id: 'x', workflow: 'report', cron: '* * * * *', timezone: 'Mars/Base' })).toMatch(/timezone "Mars\/Base" is not an IANA time zone/);
    expect(await refused({ id: 'x', workflow: 'report', cron: '* * * * *', overlaps: 'skip' })).toMatch(/unknown option "overlaps"/);
    expect(await refused({ id: 'x', workflow: 'report', cron: '* * * * *', overlap: 'queue' })).toMatch(/overlap must be one of/);
    expect(await refused({ id: 'x', workflow: 'report', cron: '* * * * *', catchup: 'soon' })).toMatch(/catchup/);
    expect(await refused({ id: 'has space', workflow: 'report', cron: '* * * * *' })).toMatch(/id "has space" is not valid/);
    await engine.schedules.create({ id: 'x', workflow: 'report', cron: '* * * * *' });
    expect(await engine.schedules.create({ id: 'x', workflow: 'report', cron: '* * * * *' })).toMatchObject({ created: false });
    const conflict = await engine.schedules.create({ id: 'x', workflow: 'report', cron: '*/2 * * * *' }).catch((x: unknown) => x);
    expect(isStepwiseError(conflict, 'CONFLICT')).toBe(true);
    expect((await engine.schedules.update({ id: 'x', workflow: 'report', cron: '*/2 * * * *' })).cron).toBe('*/2 * * * *');
  });

  it('ctx.scheduledAt is null for a task no schedule started', async () => {
    const seen: Array<{ scheduledAt: number | null; input: unknown }> = [];
    const engine = makeEngine({ workflows: [report(seen)] });
    await startWorker(engine);
    const { id } = await engine.start('report', 1);
    expect(await engine.result(id)).toBeNull();
  });

  it('creates a schedule declared with its workflow at worker start, updates it with the code, and deletes it when the code no longer declares it', async () => {
    const clock = new ManualClock(T0);
    const url = tempDbUrl();
    const v1 = workflow('nightly', async (ctx) => ctx.scheduledAt?.getTime() ?? null, { schedule: { cron: '0 2 * * *', timezone: 'Europe/Berlin', input: { v: 1 } } });
    const first = new Engine({ store: url, workflows: [v1], clock });
    try {
      const errors: Error[] = [];
      const w = await startWorker(first, SCAN);
      w.on('worker:error', (e) => errors.push(e.error));
      await eventually(async () => (await first.schedules.list()).length === 1, 10_000, 'the declared schedule');
      expect(await first.schedules.get('nightly')).toMatchObject({ source: 'workflow', cron: '0 2 * * *', input: { v: 1 }, nextRunAt: Date.UTC(2030, 0, 1, 1) });
      await clock.set(Date.UTC(2030, 0, 1, 1, 0, 1));
      await eventually(async () => (await first.list()).tasks.length === 1, 10_000, 'the first night');
      expect(errors).toEqual([]);
    } finally {
      await first.close();
    }
    // The next deploy changes the schedule: its definition follows the code, its history stays.
    const v2 = workflow('nightly', async () => null, { schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin', input: { v: 2 } } });
    const second = new Engine({ store: url, workflows: [v2], clock });
    try {
      await startWorker(second, SCAN);
      await eventually(async () => (await second.schedules.get('nightly')).cron === '0 3 * * *', 10_000, 'the update');
      expect(await second.schedules.get('nightly')).toMatchObject({ input: { v: 2 }, lastRunAt: Date.UTC(2030, 0, 1, 1), nextRunAt: Date.UTC(2030, 0, 1, 2) }); // 03:00 in Berlin
    } finally {
      await second.close();
    }
    // A deploy without the schedule removes it; a schedule created through the API stays.
    const v3 = workflow('nightly', async () => null);
    const third = new Engine({ store: url, workflows: [v3], clock });
    try {
      await third.schedules.create({ id: 'by-hand', workflow: 'nightly', cron: '0 4 * * *' });
      await startWorker(third, SCAN);
      await eventually(async () => (await third.schedules.list()).length === 1, 10_000, 'the removal');
      expect((await third.schedules.list()).map((s) => s.id)).toEqual(['by-hand']);
    } finally {
      await third.close();
    }
  });

  it('keeps a schedule created through the API when a workflow declares one under the same id, and says so in worker:error', async () => {
    const clash = workflow('clash', async () => null, { schedule: { id: 'shared', cron: '0 5 * * *' } });
    const engine = makeEngine({ workflows: [clash], clock: new ManualClock(T0) });
    await engine.schedules.create({ id: 'shared', workflow: 'clash', cron: '0 6 * * *' });
    const errors: Error[] = [];
    const w = engine.worker({ ...SCAN, pollIntervalMs: 20 });
    w.on('worker:error', (e) => errors.push(e.error));
    await w.start();
    await eventually(() => errors.length > 0, 10_000, 'the clash to be reported');
    expect(isStepwiseError(errors[0], 'CONFLICT')).toBe(true);
    expect(errors[0]!.message).toContain('"shared"');
    expect((await engine.schedules.get('shared')).cron).toBe('0 6 * * *');
  });

  it('refuses a bad schedule option when the workflow is defined', () => {
    expect(() => workflow('bad', async () => null, { schedule: { cron: '* * * *  * * * *' } })).toThrow(/workflow\("bad"\): schedule/);
    expect(() => workflow('bad', async () => null, { schedule: { cron: '* * * * *', workflow: 'x' } as never })).toThrow(/takes no "workflow"/);
  });
});
