// A PostgreSQL write batch commits in parts: its multi-row step statement autocommits before its
// transitions run. When a later part fails, the store says which ops committed (committedOf) and
// the write batcher answers them and writes only the rest again. Written again, a step result would
// have moved its log entry to a new seq, leaving a gap in the task's gapless log.
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation, planTransition } from '../src/transitions.ts';
import { committedOf, type TaskRow, type WriteOp } from '../src/store.ts';
import { WriteBatcher } from '../src/write-batcher.ts';
import { claimOf } from './support/claims.ts';
import { stepRow } from './support/rows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, sql } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schemas: string[] = [];
afterAll(async () => {
  if (await hasPostgres()) for (const s of schemas) await dropSchema(s);
});

/** Three running tasks, and a batch: two step results and the third task's completion. */
async function setUp(): Promise<{ store: PostgresStore; schema: string; ops: WriteOp[] }> {
  const schema = freshSchemaName('sw_partial');
  schemas.push(schema);
  const store = new PostgresStore(PG_URL, { schema });
  await store.migrate();
  for (const id of ['t1', 't2', 't3']) {
    await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: null, idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'u' }) });
  }
  const tasks = new Map((await store.claim(claimOf('w', T0))).map((c) => [c.task.id, c.task] as const));
  const t3 = tasks.get('t3') as TaskRow;
  const end = planTransition({
    taskId: 't3',
    state: t3,
    event: 'complete',
    guard: { epoch: t3.epoch },
    at: T0 + 5,
    workerId: 'w',
    set: { clearLease: true, output: '1', finishedAt: T0 + 5 },
  });
  const ops: WriteOp[] = [
    { kind: 'step', taskId: 't1', epoch: tasks.get('t1')!.epoch, step: stepRow('t1', 0, tasks.get('t1')!.epoch) },
    { kind: 'step', taskId: 't2', epoch: tasks.get('t2')!.epoch, step: stepRow('t2', 0, tasks.get('t2')!.epoch) },
    end.write,
  ];
  // The first completion written fails with a transient error (a deadlock, say); a sequence's
  // count survives the rollback, so the second attempt passes.
  await sql(`CREATE SEQUENCE "${schema}".fail_once`);
  await sql(`CREATE FUNCTION "${schema}".fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF nextval('"${schema}".fail_once') = 1 THEN RAISE EXCEPTION 'injected' USING ERRCODE = '40P01'; END IF; RETURN NEW; END $$`);
  await sql(`CREATE TRIGGER fail_once BEFORE UPDATE ON "${schema}".tasks FOR EACH ROW WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION "${schema}".fail_once()`);
  return { store, schema, ops };
}

async function logOf(store: PostgresStore, taskId: string): Promise<string[]> {
  return (await store.getEvents(taskId)).map((e) => `${e.seq} ${e.type}${e.type.startsWith('step:') ? ` ${JSON.parse(e.data ?? '{}').seq}` : ''}`);
}

describe.skipIf(!(await hasPostgres()))('a PostgreSQL write batch that fails after a part committed', () => {
  it('throws an error that names the committed ops with their results', async () => {
    const { store, ops } = await setUp();
    try {
      const error = await store.writeBatch(ops).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).not.toBeNull();
      expect([...(committedOf(error) ?? new Map()).entries()]).toEqual([
        [0, true],
        [1, true],
      ]);
    } finally {
      await store.close();
    }
  });

  it('through the write batcher: the committed steps are not written again, and every log stays gapless', async () => {
    const { store, ops } = await setUp();
    const retried: unknown[] = [];
    const batcher = new WriteBatcher(store, { onRetry: (e) => retried.push(e) });
    try {
      const results = await Promise.all(ops.map((op) => batcher.write(op)));
      expect(results.slice(0, 2)).toEqual([true, true]);
      expect((results[2] as TaskRow).status).toBe('succeeded');
      expect(retried).toHaveLength(1);
      expect(await logOf(store, 't1')).toEqual(['1 transition', '2 transition', '3 step:completed 0']);
      expect(await logOf(store, 't2')).toEqual(['1 transition', '2 transition', '3 step:completed 0']);
      expect(await logOf(store, 't3')).toEqual(['1 transition', '2 transition', '3 transition']);
    } finally {
      await store.close();
    }
  });
});
