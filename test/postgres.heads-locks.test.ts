// A checkpoint on PostgreSQL locks its task's head (task_heads), not the task row, and holds it to
// its commit. Written one by one in a transaction with a transition of the same task (a write sent
// again takes that path), it must not hold the head while the transition waits for the task row:
// a signal's append, which locks the row and then the head, would close a cycle of waits that
// PostgreSQL ends with a deadlock error after its deadlock timeout.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation } from '../src/transitions.ts';
import { claimOf } from './support/claims.ts';
import type { WriteOp } from '../src/store.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, untilLockWaitIn } from './support/postgres.ts';
import { stepRow } from './support/rows.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_headlocks');
afterAll(async () => {
  if (await hasPostgres()) await dropSchema(schema);
});

describe.skipIf(!(await hasPostgres()))('task heads and task rows on PostgreSQL', () => {
  it('a checkpoint written in a transaction with a transition waits for the task row before it takes the head: an append holding the row gets the head', async () => {
    const store = new PostgresStore(PG_URL, { schema });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      await store.insertTask({
        id: 'a-task',
        workflow: 'wf',
        workflowVersion: '1',
        input: null,
        idempotencyKey: null,
        runAt: T0,
        createdAt: T0,
        ...planCreation({ kind: 'user', id: 'anonymous' }),
      });
      const [claimed] = await store.claim(claimOf('w1', T0));
      const epoch = claimed?.task.epoch as number;
      const ops: WriteOp[] = [
        // Sent again (its first answer lost): one by one, in a transaction with the task's end.
        { kind: 'step', taskId: 'a-task', epoch, step: stepRow('a-task', 0, epoch), again: true },
        {
          kind: 'transition',
          taskId: 'a-task',
          event: 'complete',
          from: ['running'],
          to: 'succeeded',
          guard: { epoch },
          set: { clearLease: true, output: '1', finishedAt: T0 },
          at: T0,
          log: [],
        },
      ];

      // An append's transaction (a signal's): the task row first…
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${schema}".tasks WHERE id = 'a-task' FOR NO KEY UPDATE`);
      const batch = store.writeBatch(ops);
      // …and once the batch waits for a row lock…
      await untilLockWaitIn(holder, schema);
      // …its head: the batch holds no head while it waits, so no deadlock.
      await holder.query("SET LOCAL deadlock_timeout = '100ms'");
      await holder.query(`UPDATE "${schema}".task_heads SET event_seq = event_seq WHERE id = 'a-task'`);
      await holder.query('COMMIT');
      const [written, ended] = await batch;
      expect(written).toBe(true);
      expect((ended as { status?: string } | null)?.status).toBe('succeeded');
    } finally {
      await holder.end();
      await store.close();
    }
  });
});
