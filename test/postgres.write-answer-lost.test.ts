// A checkpoint whose commit's answer was lost (the connection dropped around the commit) may have
// committed: the worker sends it again. Written again, a step result would have moved its log entry
// to a new seq, leaving a gap in the task's gapless log, and a step's wait or retry entry would have
// been logged twice. Sent again, the write takes an identical row at its position as itself.
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation } from '../src/transitions.ts';
import type { Store, StepWrite, TaskRow } from '../src/store.ts';
import { WriteBatcher } from '../src/write-batcher.ts';
import { claimOf } from './support/claims.ts';
import { stepRow } from './support/rows.ts';
import { aroundEachWrite } from './support/engine.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schemas: string[] = [];
afterAll(async () => {
  if (await hasPostgres()) for (const s of schemas) await dropSchema(s);
});

/** Running tasks `ids` (each claimed once: epoch 1, log entries 1 and 2). */
async function setUp(ids: readonly string[]): Promise<{ store: PostgresStore; tasks: Map<string, TaskRow> }> {
  const schema = freshSchemaName('sw_lost');
  schemas.push(schema);
  const store = new PostgresStore(PG_URL, { schema });
  await store.migrate();
  for (const id of ids) {
    await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: null, idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'u' }) });
  }
  const tasks = new Map((await store.claim(claimOf('w', T0))).map((c) => [c.task.id, c.task] as const));
  return { store, tasks };
}

/** The task's log as `seq type [step seq]`, and its log counter. */
async function logOf(store: PostgresStore, taskId: string): Promise<string[]> {
  return (await store.getEvents(taskId)).map((e) => `${e.seq} ${e.type}${e.type.startsWith('step:') ? ` ${JSON.parse(e.data ?? '{}').seq}` : ''}`);
}

function write(taskId: string, epoch: number, seq: number, over: Parameters<typeof stepRow>[3] = {}, extra: Partial<StepWrite> = {}): StepWrite {
  return { kind: 'step', taskId, epoch, step: stepRow(taskId, seq, epoch, over), ...extra };
}

/** A store whose first `writeBatch` commits and then fails as a dropped connection does. */
function losingFirstAnswer(store: PostgresStore): Store {
  let lost = false;
  return aroundEachWrite(store, async (ops, write) => {
    const results = await write(ops);
    if (lost) return results;
    lost = true;
    throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
  });
}

describe.skipIf(!(await hasPostgres()))('a PostgreSQL checkpoint sent again after its answer was lost', () => {
  it('a step result written twice on the hot path (a fresh position) keeps its one log entry and seq', async () => {
    const { store, tasks } = await setUp(['t1']);
    try {
      const op = write('t1', tasks.get('t1')!.epoch, 0, {}, { fresh: true });
      expect(await store.writeBatch([op])).toEqual([true]);
      expect(await store.writeBatch([op])).toEqual([true]);
      expect(await store.writeBatch([{ ...op, again: true }])).toEqual([true]);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:completed 0']);
      // The next step takes the next seq: no gap.
      expect(await store.writeBatch([write('t1', 1, 1, {}, { fresh: true })])).toEqual([true]);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:completed 0', '4 step:completed 1']);
    } finally {
      await store.close();
    }
  });

  it('a step whose entry is its own (a retry due) sent again is logged once; one that differs is written with a new entry', async () => {
    const { store, tasks } = await setUp(['t1']);
    try {
      const epoch = tasks.get('t1')!.epoch;
      const retrying = write('t1', epoch, 0, { status: 'retrying', output: null, error: '{"message":"429"}', finishedAt: null, wakeAt: T0 + 100 });
      expect(await store.writeBatch([retrying])).toEqual([true]);
      expect(await store.writeBatch([{ ...retrying, again: true }])).toEqual([true]);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:retrying 0']);
      // The second attempt's row differs: it is a write of its own, sent again or not.
      const second = write('t1', epoch, 0, { attempts: 2 }, { again: true });
      expect(await store.writeBatch([second])).toEqual([true]);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:retrying 0', '4 step:completed 0']);
      expect((await store.getSteps('t1'))[0]).toMatchObject({ attempts: 2, status: 'completed' });
    } finally {
      await store.close();
    }
  });

  it('a step that consumed a signal, sent again, is accepted with its one consumption and one entry', async () => {
    const { store, tasks } = await setUp(['t1']);
    try {
      await store.insertSignal({ actorKind: 'user', actorId: 'u', taskId: 't1', name: 'go', payload: '"a"', idempotencyKey: null, at: T0 + 1 });
      const signalId = (await store.getSignals('t1'))[0]!.id;
      const events = (await logOf(store, 't1')).length;
      const op = write('t1', tasks.get('t1')!.epoch, 0, { kind: 'event', name: 'go', output: '"a"' }, { consume: { signalId, seq: 0 } });
      expect(await store.writeBatch([op])).toEqual([true]);
      const once = await logOf(store, 't1');
      expect(once).toHaveLength(events + 2);
      expect(await store.writeBatch([{ ...op, again: true }])).toEqual([true]);
      expect(await logOf(store, 't1')).toEqual(once);
    } finally {
      await store.close();
    }
  });

  it('is still refused after the lease moved on, when no identical row is there', async () => {
    const { store, tasks } = await setUp(['t1']);
    try {
      const stale = write('t1', tasks.get('t1')!.epoch + 1, 0, {}, { again: true });
      expect(await store.writeBatch([stale])).toEqual([false]);
      expect(await store.getSteps('t1')).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('through the write batcher: a batch committed whose answer was lost is answered accepted, each log gapless', async () => {
    const { store, tasks } = await setUp(['t1', 't2']);
    const retried: unknown[] = [];
    const batcher = new WriteBatcher(losingFirstAnswer(store), { onRetry: (e) => retried.push(e) });
    try {
      const ops = ['t1', 't2'].map((id) => write(id, tasks.get(id)!.epoch, 0, {}, { fresh: true }));
      expect(await Promise.all(ops.map((op) => batcher.write(op)))).toEqual([true, true]);
      expect(retried).toHaveLength(1);
      for (const id of ['t1', 't2']) expect(await logOf(store, id)).toEqual(['1 transition', '2 transition', '3 step:completed 0']);
    } finally {
      await store.close();
    }
  });

  it('through the write batcher: a lone step on the hot path whose answer was lost is answered accepted, its log gapless', async () => {
    const { store, tasks } = await setUp(['t1']);
    const retried: unknown[] = [];
    const batcher = new WriteBatcher(losingFirstAnswer(store), { onRetry: (e) => retried.push(e), alone: () => true });
    try {
      expect(await batcher.write(write('t1', tasks.get('t1')!.epoch, 0))).toBe(true);
      expect(retried).toHaveLength(1);
      expect(await batcher.write(write('t1', tasks.get('t1')!.epoch, 1))).toBe(true);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:completed 0', '4 step:completed 1']);
    } finally {
      await store.close();
    }
  });
});
