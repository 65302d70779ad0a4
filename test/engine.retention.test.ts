// Deleting finished tasks: engine.delete (one task), engine.purge (by age, status and workflow) and
// the workers' retention sweep (EngineOptions.retention, a workflow's `retention`), on the engine
// clock. A deleted task goes with everything it owns; observers hear of every deletion.
import { describe, expect, it, onTestFinished } from 'vitest';
import { ERROR_CODES, InvalidArgumentError, openStore, workflow, type EngineOptions, type Observer, type TasksDeletedEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const DAY = 86_400_000;

const done = workflow('done', async (ctx, input: { n: number }) => ctx.step('work', () => input.n * 2));
const broken = workflow('broken', async (ctx) =>
  ctx.step('work', () => {
    throw new InvalidArgumentError('bad input');
  }),
);
const waits = workflow('waits', async (ctx) => ctx.waitForEvent('go'));

/** An engine on a store that counts retention sweeps (their deletions) and heartbeat ticks (each one's sweep of abandoned cancelling tasks). */
async function countingEngine(options: EngineOptions): Promise<{ engine: ReturnType<typeof makeEngine>; sweeps: () => number; ticks: () => number }> {
  const inner = await openStore(tempDbUrl());
  onTestFinished(() => inner.close());
  let sweeps = 0;
  let ticks = 0;
  const store = spyStore(inner, {
    deleteTasks:
      (original) =>
      async (...args) => {
        sweeps++;
        return original(...args);
      },
    expireLeases: (original) => async (r) => {
      ticks++;
      return original(r);
    },
  });
  return { engine: makeEngine({ ...options, store }), sweeps: () => sweeps, ticks: () => ticks };
}

/** An observer that keeps every deletion it hears of. */
function deletions(): { observer: Observer; seen: TasksDeletedEvent[] } {
  const seen: TasksDeletedEvent[] = [];
  return { seen, observer: { name: 'deletions', onTasksDeleted: (e) => void seen.push(e) } };
}

describe(`deleting finished tasks (${TEST_STORE})`, () => {
  it('engine.delete removes a finished task with its steps and log; the id is then unknown and its key starts a new task', async () => {
    const { observer, seen } = deletions();
    const engine = makeEngine({ workflows: [done, waits], observers: [observer] });
    await startWorker(engine);
    const first = await engine.start(done, { n: 2 }, { idempotencyKey: 'report-1' });
    expect(await first.result()).toBe(4);

    const summary = await engine.delete(first.id, { by: 'ops' });
    expect(summary).toMatchObject({ id: first.id, workflow: 'done', status: 'succeeded', output: 4 });
    await expect(engine.get(first.id)).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(engine.result(first.id)).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(engine.delete(first.id)).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(
      (async () => {
        for await (const e of engine.events({ taskId: first.id, follow: false })) void e;
      })(),
    ).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    expect(seen).toMatchObject([{ reason: 'delete', by: { kind: 'user', id: 'ops' }, tasks: [{ id: first.id, workflow: 'done', status: 'succeeded' }] }]);

    // The key is free again: a start with it makes a new task that runs.
    const again = await engine.start(done, { n: 5 }, { idempotencyKey: 'report-1' });
    expect(again.created).toBe(true);
    expect(again.id).not.toBe(first.id);
    expect(await again.result()).toBe(10);
  });

  it('refuses to delete a task that is not finished (CONFLICT, nothing changes) and one it does not know', async () => {
    const engine = makeEngine({ workflows: [waits] });
    await startWorker(engine);
    const { id } = await engine.start(waits);
    await waitForStatus(engine, id, 'waiting');
    const refusal = engine.delete(id);
    await expect(refusal).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT });
    await expect(refusal).rejects.toThrow(/waiting: only a finished task .* can be deleted\. Cancel it first/);
    await expect(engine.delete('no-such-task')).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(engine.delete('')).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    // The task is untouched and goes on.
    await engine.signal(id, 'go', { ok: true });
    expect(await engine.result(id)).toMatchObject({ payload: { ok: true } });
    await engine.delete(id);
  });

  it('engine.purge deletes tasks finished at least olderThan ago, by status and workflow, up to a limit; dryRun only counts', async () => {
    const clock = new ManualClock();
    const { observer, seen } = deletions();
    const engine = makeEngine({ workflows: [done, broken, waits], clock, observers: [observer] });
    await startWorker(engine);
    const finish = async (): Promise<{ ok: string[]; failed: string[]; cancelled: string[] }> => {
      const ok = await Promise.all([1, 2].map(async (n) => (await engine.start(done, { n })).id));
      const failed = [(await engine.start(broken)).id];
      const cancelled = [(await engine.start(waits)).id];
      for (const id of ok) await waitForStatus(engine, id, 'succeeded');
      await waitForStatus(engine, failed[0] as string, 'failed');
      await waitForStatus(engine, cancelled[0] as string, 'waiting');
      await engine.cancel(cancelled[0] as string);
      return { ok, failed, cancelled };
    };
    const old = await finish();
    await clock.advance('10d');
    const recent = await finish();
    const stillWaiting = (await engine.start(waits)).id;
    await waitForStatus(engine, stillWaiting, 'waiting');

    expect(await engine.purge({ olderThan: '7d', dryRun: true })).toEqual({ count: 4, byStatus: { succeeded: 2, failed: 1, cancelled: 1 }, dryRun: true });
    expect(await engine.purge({ olderThan: '7d', status: 'failed', workflow: 'broken' })).toEqual({ count: 1, byStatus: { succeeded: 0, failed: 1, cancelled: 0 }, dryRun: false });
    expect(await engine.purge({ olderThan: '7d', workflow: ['done', 'waits'], limit: 1 })).toMatchObject({ count: 1 });
    expect(await engine.purge({ olderThan: '7d' })).toEqual({ count: 2, byStatus: { succeeded: 1, failed: 0, cancelled: 1 }, dryRun: false });
    expect(await engine.purge({ olderThan: '7d' })).toMatchObject({ count: 0 });
    for (const id of [...old.ok, ...old.failed, ...old.cancelled]) await expect(engine.get(id)).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    for (const id of [...recent.ok, ...recent.failed, ...recent.cancelled, stillWaiting]) expect((await engine.get(id)).id).toBe(id);
    expect(
      seen
        .flatMap((e) => e.tasks)
        .map((t) => t.id)
        .sort(),
    ).toEqual([...old.ok, ...old.failed, ...old.cancelled].sort());
    expect(new Set(seen.map((e) => e.reason))).toEqual(new Set(['purge']));

    // olderThan 0: every finished task; the waiting one stays.
    expect(await engine.purge({ olderThan: 0, by: 'ops' })).toMatchObject({ count: 4 });
    expect((await engine.list()).tasks.map((t) => t.id)).toEqual([stillWaiting]);
  });

  it('refuses a purge without olderThan, or of a status a task is not finished in, or with a bad limit or workflow', async () => {
    const engine = makeEngine({ workflows: [done] });
    await expect(engine.purge({} as never)).rejects.toThrow(/olderThan/);
    await expect(engine.purge({ olderThan: 'soon' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    await expect(engine.purge({ olderThan: '1d', status: 'running' as never })).rejects.toThrow(/only finished tasks are/);
    await expect(engine.purge({ olderThan: '1d', status: [] })).rejects.toThrow(/at least one status/);
    await expect(engine.purge({ olderThan: '1d', limit: 0 })).rejects.toThrow(/limit/);
    await expect(engine.purge({ olderThan: '1d', workflow: [] })).rejects.toThrow(/workflow/);
  });

  it('workers delete tasks past the retention of their workflows on the engine clock; a workflow overrides the engine per status', async () => {
    const clock = new ManualClock();
    const { observer, seen } = deletions();
    const keepFailed = workflow(
      'keep-failed',
      async (ctx) =>
        ctx.step('work', () => {
          throw new InvalidArgumentError('bad input');
        }),
      { retention: { failed: null, succeeded: '1h' } },
    );
    const engine = makeEngine({ workflows: [done, broken, keepFailed, waits], clock, observers: [observer], retention: { succeeded: '1d', failed: '2d' } });
    const worker = await startWorker(engine, { retentionSweepMs: 20 });
    const ok = (await engine.start(done, { n: 1 })).id;
    const failed = (await engine.start(broken)).id;
    const keptFailure = (await engine.start(keepFailed)).id;
    const waiting = (await engine.start(waits)).id;
    await waitForStatus(engine, ok, 'succeeded');
    await waitForStatus(engine, failed, 'failed');
    await waitForStatus(engine, keptFailure, 'failed');
    await waitForStatus(engine, waiting, 'waiting');
    const exists = async (id: string): Promise<boolean> =>
      engine.get(id).then(
        () => true,
        () => false,
      );

    await clock.advance(DAY + 1000);
    await eventually(async () => !(await exists(ok)), 10_000, 'the succeeded task deleted after a day');
    expect(await exists(failed)).toBe(true);
    await clock.advance(DAY);
    await eventually(async () => !(await exists(failed)), 10_000, 'the failed task deleted after two days');
    // A workflow that keeps its failures (null) keeps them; a waiting task is never deleted: a sweep
    // after the clock moved 30 days deletes a task finished since, and leaves those two.
    const later = (await engine.start(done, { n: 2 })).id;
    await waitForStatus(engine, later, 'succeeded');
    await clock.advance(30 * DAY);
    await eventually(async () => !(await exists(later)), 10_000, 'a sweep after 30 days');
    expect(await exists(keptFailure)).toBe(true);
    expect(await exists(waiting)).toBe(true);
    expect(seen.flatMap((e) => e.tasks.map((t) => t.id)).sort()).toEqual([ok, failed, later].sort());
    expect(seen.every((e) => e.reason === 'retention' && e.by.kind === 'worker' && e.by.id === worker.id)).toBe(true);
  });

  it('a worker sweeps only the workflows it serves, and none without a retention or with retentionSweepMs 0', async () => {
    const clock = new ManualClock();
    const { engine, sweeps } = await countingEngine({ workflows: [done, waits], clock, retention: { succeeded: '1h', cancelled: '1h' } });
    const starter = await startWorker(engine, { retentionSweepMs: 0 });
    const ok = (await engine.start(done, { n: 1 })).id;
    const cancelled = (await engine.start(waits)).id;
    await waitForStatus(engine, ok, 'succeeded');
    await engine.cancel(cancelled);
    await starter.stop();
    await clock.advance('2h');
    const onlyWaits = await startWorker(engine, { workflows: ['waits'], retentionSweepMs: 20 });
    await eventually(
      async () =>
        engine.get(cancelled).then(
          () => false,
          () => true,
        ),
      10_000,
      'the cancelled task deleted',
    );
    // Two more sweeps of that worker: the task of the workflow it does not serve is kept.
    const after = sweeps();
    await eventually(() => sweeps() >= after + 2, 10_000, 'two more sweeps');
    expect((await engine.get(ok)).status).toBe('succeeded');
    await onlyWaits.stop();

    const { engine: noPolicy, sweeps: noPolicySweeps, ticks } = await countingEngine({ workflows: [done], clock });
    const w = await startWorker(noPolicy, { retentionSweepMs: 20, heartbeatMs: 50 });
    const kept = (await noPolicy.start(done, { n: 1 })).id;
    await waitForStatus(noPolicy, kept, 'succeeded');
    await clock.advance('3650d');
    // Five heartbeats (250 ms of real time, a dozen sweep periods): no sweep ran, the task is kept.
    const from = ticks();
    await eventually(() => ticks() >= from + 5, 10_000, 'five heartbeats');
    expect(noPolicySweeps()).toBe(0);
    expect((await noPolicy.get(kept)).status).toBe('succeeded');
    await w.stop();
    expect(() => engine.worker({ retentionSweepMs: -1 })).toThrow(/retentionSweepMs/);
  });

  it('refuses a retention that is not a duration or null per final status', () => {
    expect(() => makeEngine({ retention: { running: '1d' } as never })).toThrow(/retention\.running is not a final status/);
    expect(() => makeEngine({ retention: { succeeded: 'a week' } })).toThrow(/retention\.succeeded/);
    expect(() => makeEngine({ retention: 7 as never })).toThrow(/retention must be/);
    expect(() => workflow('w', async () => 1, { retention: { failed: -1 } })).toThrow(/retention\.failed/);
  });

  it("a reader of every task's log goes on after deletions: nothing after them is missed", async () => {
    const engine = makeEngine({ workflows: [done, waits] });
    await startWorker(engine);
    const seen: string[] = [];
    const stop = new AbortController();
    const reading = (async () => {
      for await (const e of engine.events({ signal: stop.signal, pollMs: 20 })) seen.push(`${e.taskId}/${e.seq}`);
    })();
    const first = await engine.start(done, { n: 1 });
    await first.result();
    await eventually(() => seen.some((k) => k.startsWith(first.id)), 10_000, 'the first task in the stream');
    await engine.delete(first.id);
    const parked = (await engine.start(waits)).id;
    await waitForStatus(engine, parked, 'waiting');
    await engine.signal(parked, 'go', 1);
    await waitForStatus(engine, parked, 'succeeded');
    const log = (await engine.get(parked)).history.map((e) => `${parked}/${e.seq}`);
    await eventually(() => log.every((k) => seen.includes(k)), 10_000, 'every entry of the task started after the delete');
    stop.abort();
    await reading;
  });
});
