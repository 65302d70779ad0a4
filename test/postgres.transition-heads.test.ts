// Ends written asking for the task's head alone (`answer: 'head'`, what a worker asks when nobody
// in its process reads finished rows) are answered with the head on PostgreSQL, and write the same
// rows; asking for the end (`answer: 'end'`, when `result()` may wait here) adds the outcome
// (output, error, cancel reason), never the input; one op of the batch wanting the whole row gets
// whole rows for all. A head is news of the end without its outcome, so a waiter reads the row
// from the store; an end hands the waiter the outcome.
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation, planTransition } from '../src/transitions.ts';
import type { TaskEnd, TaskRow, TransitionWrite, WriteResult } from '../src/store.ts';
import { ResultWaiters } from '../src/result-waiters.ts';
import { systemClock } from '../src/clock.ts';
import { NewsBus } from '../src/news.ts';
import { WorkerNewsDesk } from '../src/worker/news.ts';
import { claimOf } from './support/claims.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schemas: string[] = [];
afterAll(async () => {
  if (await hasPostgres()) for (const s of schemas) await dropSchema(s);
});

/** Three claimed tasks and the completion of each (output "1", "2", "3"). */
async function setUp(): Promise<{ store: PostgresStore; ends: TransitionWrite[] }> {
  const schema = freshSchemaName('sw_heads');
  schemas.push(schema);
  const store = new PostgresStore(PG_URL, { schema });
  await store.migrate();
  for (const id of ['t1', 't2', 't3']) {
    await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: '{"n":1}', idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'u' }) });
  }
  const claimed = (await store.claim(claimOf('w', T0))).map((c) => c.task).sort((a, b) => a.id.localeCompare(b.id));
  const ends = claimed.map(
    (t: TaskRow, k) =>
      planTransition({
        taskId: t.id,
        state: t,
        event: 'complete',
        guard: { epoch: t.epoch },
        at: T0 + 5,
        workerId: 'w',
        set: { clearLease: true, output: String(k + 1), finishedAt: T0 + 5 },
      }).write,
  );
  return { store, ends };
}

describe.skipIf(!(await hasPostgres()))('ends that ask for the head alone, on PostgreSQL', () => {
  it('are answered with each task’s head, and write the whole end (status, output, log) all the same', async () => {
    const { store, ends } = await setUp();
    try {
      const results = await store.writeBatch(ends.map((e) => ({ ...e, answer: 'head' as const })));
      expect(results).toEqual(['t1', 't2', 't3'].map((id) => ({ id, workflow: 'wf', status: 'succeeded', epoch: 1, leaseOwner: null, runAt: T0, updatedAt: T0 + 5, head: true })));
      for (const [k, id] of ['t1', 't2', 't3'].entries()) {
        const row = await store.getTask(id);
        expect(row).toMatchObject({ status: 'succeeded', output: String(k + 1), input: '{"n":1}', leaseOwner: null, finishedAt: T0 + 5 });
        expect((await store.getEvents(id)).map((e) => e.type)).toEqual(['transition', 'transition', 'transition']);
      }
    } finally {
      await store.close();
    }
  });

  it('asking for the end, are answered with each task’s head and outcome, not its input', async () => {
    const { store, ends } = await setUp();
    try {
      const results = await store.writeBatch(ends.map((e) => ({ ...e, answer: 'end' as const })));
      expect(results).toEqual(
        ['t1', 't2', 't3'].map((id, k) => ({
          id,
          workflow: 'wf',
          status: 'succeeded',
          epoch: 1,
          leaseOwner: null,
          runAt: T0,
          updatedAt: T0 + 5,
          output: String(k + 1),
          error: null,
          cancelReason: null,
          head: true,
          end: true,
        })),
      );
      expect((await store.getTask('t2'))?.input).toBe('{"n":1}');
    } finally {
      await store.close();
    }
  });

  it('are answered with ends for all when some ops of the batch ask for heads and some for ends', async () => {
    const { store, ends } = await setUp();
    try {
      const results = await store.writeBatch(ends.map((e, k) => ({ ...e, answer: k === 0 ? ('end' as const) : ('head' as const) })));
      expect(results.map((r) => (r as TaskEnd).output)).toEqual(['1', '2', '3']);
      expect(results.every((r) => typeof r === 'object' && r !== null && 'end' in r && !('input' in r))).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('are answered with whole rows when one op of the batch wants its row (the others asking for a head or an end)', async () => {
    const { store, ends } = await setUp();
    try {
      const results = await store.writeBatch(ends.map((e, k) => (k === 1 ? e : { ...e, answer: k === 0 ? ('head' as const) : ('end' as const) })));
      expect(results.map((r) => (r as TaskRow).output)).toEqual(['1', '2', '3']);
      expect(results.every((r) => typeof r === 'object' && r !== null && !('head' in r))).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe('news of ends answered with heads', () => {
  it('tells this process’s waiters the task settled without handing them a row (they read it)', () => {
    const bus = new NewsBus();
    const desk = new WorkerNewsDesk(bus, 'w');
    const heard: Array<{ taskId: string; status?: string; row?: unknown }> = [];
    bus.on('task:settled', (e) => heard.push(e));
    const head: WriteResult = { id: 't1', workflow: 'wf', status: 'succeeded', epoch: 1, leaseOwner: null, runAt: null, updatedAt: 5, head: true };
    const running: WriteResult = { ...head, id: 't2', status: 'waiting' };
    desk.finished([head, running, true, null]);
    expect(heard).toEqual([{ type: 'task:settled', taskId: 't1', status: 'succeeded' }]);
    expect(desk.rowsHeard()).toBe(true);
  });

  it('hands this process’s waiters the outcome of an end, which result() answers without reading the task', async () => {
    const bus = new NewsBus();
    const desk = new WorkerNewsDesk(bus, 'w');
    const waiters = new ResultWaiters(bus, systemClock);
    const watch = waiters.watch('t1');
    const end: WriteResult = {
      id: 't1',
      workflow: 'wf',
      status: 'failed',
      epoch: 1,
      leaseOwner: null,
      runAt: null,
      updatedAt: 5,
      output: null,
      error: '{"message":"no"}',
      cancelReason: null,
      head: true,
      end: true,
    };
    desk.finished([end]);
    expect(watch.settled).toEqual(end);
    expect(await watch.next(1000)).toBe('news');
    watch.close();
  });
});
