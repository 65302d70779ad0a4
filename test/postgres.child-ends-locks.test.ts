// The ends of child tasks written in one batch lock the children and their parents in id order,
// as the heartbeat and every multi-row writer do. A parent's id sorts before its children's: a
// batch that locked a child and then waited for its parent deadlocked with a heartbeat holding the
// parent and reaching for the child (PostgreSQL broke it after its deadlock timeout, a second's
// stall, seen as a fan-out's parent woken late).
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { newTask } from './support/rows.ts';
import { claimOf } from './support/claims.ts';
import type { TransitionWrite } from '../src/store.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, untilBlockedBy } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_childlocks');
afterAll(async () => {
  if (await hasPostgres()) for (const suffix of ['b', 'c', 'cl']) await dropSchema(`${schema}_${suffix}`);
});

const CASES = [
  { name: 'the multi-row statement of a batch', consume: false, lone: false },
  // An end that consumes a signal (a child whose last call was an event wait) is not batched: it goes one by one.
  { name: 'the one-by-one transaction of a batch', consume: true, lone: false },
  { name: 'the transaction of a lone end', consume: true, lone: true },
] as const;

describe.skipIf(!(await hasPostgres()))('ends of children on PostgreSQL', () => {
  it.each(CASES)('take the parent’s lock before any child’s ($name): a transaction holding the parent can still lock the children while the end waits', async ({ consume, lone }) => {
    const store = new PostgresStore(PG_URL, { schema: `${schema}_${consume ? 'c' : 'b'}${lone ? 'l' : ''}` });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      // Ids in creation order, as the engine makes them: the parent's sorts first.
      const task = (id: string, parentId?: string) => store.insertTask(newTask(id, parentId));
      await task('a-parent');
      await task('b-child-1', 'a-parent');
      await task('c-child-2', 'a-parent');
      const claimed = await store.claim(claimOf('w1', T0));
      const epochOf = (id: string) => claimed.find((c) => c.task.id === id)?.task.epoch as number;
      const signalOf: Record<string, number> = {};
      if (consume) {
        for (const id of ['b-child-1', 'c-child-2']) {
          await store.insertSignal({ taskId: id, name: 'go', payload: null, idempotencyKey: null, at: T0, actorKind: 'user', actorId: 'anonymous' });
          signalOf[id] = ((await store.getSignals(id))[0] as { id: number }).id;
        }
      }
      const end = (id: string): TransitionWrite => ({
        ...(consume ? { consume: [{ signalId: signalOf[id] as number, seq: 1 }] } : {}),
        kind: 'transition',
        taskId: id,
        event: 'complete',
        from: ['running'],
        to: 'succeeded',
        guard: { epoch: epochOf(id) },
        set: { clearLease: true, output: '1', finishedAt: T0 },
        at: T0,
        log: [],
        parentSignal: { taskId: 'a-parent', name: `child:${id}` },
      });

      // A heartbeat's transaction: the parent's row first (id order).
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${store.schema}".tasks WHERE id = 'a-parent' FOR NO KEY UPDATE`);
      const batch = store.writeBatch(lone ? [end('b-child-1')] : [end('b-child-1'), end('c-child-2')]);
      // Once the batch's statement waits for a row lock (the parent's, held above)…
      await untilBlockedBy(holder);
      // …the heartbeat reaches for the children: none is held by the batch, so no deadlock (which
      // PostgreSQL would end with an error in one of the two after its deadlock timeout).
      await holder.query("SET LOCAL deadlock_timeout = '100ms'");
      await holder.query(`SELECT id FROM "${store.schema}".tasks WHERE id IN ('b-child-1', 'c-child-2') ORDER BY id FOR NO KEY UPDATE`);
      await holder.query('COMMIT');
      const ended = lone ? ['b-child-1'] : ['b-child-1', 'c-child-2'];
      expect((await batch).map((r) => (r as { status?: string } | null)?.status)).toEqual(ended.map(() => 'succeeded'));
      expect((await store.getSignals('a-parent')).map((s) => s.name)).toEqual(ended.map((id) => `child:${id}`));
      if (consume) expect((await store.getSignals('b-child-1'))[0]?.consumedSeq).toBe(1);
    } finally {
      await holder.end();
      await store.close();
    }
  });
});
