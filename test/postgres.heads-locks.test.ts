// A checkpoint on PostgreSQL locks its task's head (task_heads), not the task row, and holds it to
// its commit. Written one by one in a transaction with a transition of the same task (a write sent
// again takes that path), it must not hold the head while the transition waits for the task row:
// a signal's append, which locks the row and then the head, would close a cycle of waits that
// PostgreSQL ends with a deadlock error after its deadlock timeout. A child's end written one by
// one reaches its own head (its transition) before its parent's (its signal), against the id order
// in which a checkpoint batch locks heads: it must hold both heads before it writes.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { claimOf } from './support/claims.ts';
import type { WriteOp } from '../src/store.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, untilBlockedBy } from './support/postgres.ts';
import { newTask, stepRow } from './support/rows.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_headlocks');
afterAll(async () => {
  if (await hasPostgres()) for (const s of [schema, `${schema}_c`, `${schema}_t`]) await dropSchema(s);
});

describe.skipIf(!(await hasPostgres()))('task heads and task rows on PostgreSQL', () => {
  it('a checkpoint written in a transaction with a transition waits for the task row before it takes the head: an append holding the row gets the head', async () => {
    const store = new PostgresStore(PG_URL, { schema });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      await store.insertTask(newTask('a-task'));
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
      await untilBlockedBy(holder);
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

  it('a child’s end written one by one holds its parent’s head and its own before it writes: a checkpoint batch of both waits for it, with no cycle', async () => {
    const store = new PostgresStore(PG_URL, { schema: `${schema}_c` });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      const task = (id: string, parentId?: string) => store.insertTask(newTask(id, parentId));
      await task('a-parent');
      await task('b-child', 'a-parent');
      const claimed = await store.claim(claimOf('w1', T0));
      const epochOf = (id: string) => claimed.find((c) => c.task.id === id)?.task.epoch as number;
      // Not batchable (it deletes a journal row): a transaction of its own, its signal after its transition.
      const end: WriteOp = {
        kind: 'transition',
        taskId: 'b-child',
        event: 'fail',
        from: ['running'],
        to: 'failed',
        guard: { epoch: epochOf('b-child') },
        set: { clearLease: true, error: '"boom"', finishedAt: T0 },
        deleteSteps: [9],
        at: T0,
        log: [],
        parentSignal: { taskId: 'a-parent', name: 'child:b-child' },
      };
      // An uncommitted signal of the same key holds the end at its signal, after its transition.
      await holder.query('BEGIN');
      await holder.query(`INSERT INTO "${store.schema}".signals (task_id, name, payload, idempotency_key, created_at) VALUES ('a-parent', 'child:b-child', NULL, 'child:b-child', $1)`, [T0]);
      const ended = store.writeBatch([end]);
      await untilBlockedBy(holder);
      // Held there, the end holds both heads (without the fix, its own only: the batch below would
      // take the parent's, then wait for the child's, which the end holds while it waits for the parent's).
      const headLocked = async (id: string): Promise<boolean> => {
        await holder.query('SAVEPOINT probe');
        try {
          await holder.query(`SELECT 1 FROM "${store.schema}".task_heads WHERE id = $1 FOR NO KEY UPDATE NOWAIT`, [id]);
          return false;
        } catch {
          return true;
        } finally {
          await holder.query('ROLLBACK TO SAVEPOINT probe');
        }
      };
      expect(await headLocked('a-parent')).toBe(true);
      expect(await headLocked('b-child')).toBe(true);
      // A checkpoint batch of both tasks (a stale run of the child in another process) waits for the parent's head.
      const checkpoints = store.writeBatch([
        { kind: 'step', taskId: 'a-parent', epoch: epochOf('a-parent'), step: stepRow('a-parent', 0, epochOf('a-parent')) },
        { kind: 'step', taskId: 'b-child', epoch: epochOf('b-child'), step: stepRow('b-child', 0, epochOf('b-child')) },
      ]);
      await holder.query('ROLLBACK');
      expect(((await ended)[0] as { status?: string } | null)?.status).toBe('failed');
      // The parent's checkpoint is written; the child's is refused (its task has ended).
      expect(await checkpoints).toEqual([true, false]);
      expect((await store.getSignals('a-parent')).map((s) => s.name)).toEqual(['child:b-child']);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it('a transaction of several tasks’ transitions locks all their rows before any head: waiting for a row, it holds no head', async () => {
    const store = new PostgresStore(PG_URL, { schema: `${schema}_t` });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      for (const id of ['a-task', 'b-task']) await store.insertTask(newTask(id));
      const claimed = await store.claim(claimOf('w1', T0));
      // Parks on an event wait: not batchable, so the two go one by one in one transaction.
      const park = (id: string): WriteOp => ({
        kind: 'transition',
        taskId: id,
        event: 'park',
        from: ['running'],
        to: 'waiting',
        guard: { epoch: claimed.find((c) => c.task.id === id)?.task.epoch as number },
        set: { clearLease: true, runAt: null, waitEvents: ['go'] },
        at: T0,
        log: [],
      });
      // Another transaction holds the second task's row…
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${store.schema}".tasks WHERE id = 'b-task' FOR NO KEY UPDATE`);
      const parked = store.writeBatch([park('a-task'), park('b-task')]);
      await untilBlockedBy(holder);
      // …and the batch, waiting for it, holds the first task's row but not its head.
      await holder.query('SAVEPOINT probe');
      await holder.query(`SELECT 1 FROM "${store.schema}".task_heads WHERE id = 'a-task' FOR NO KEY UPDATE NOWAIT`);
      await holder.query('ROLLBACK TO SAVEPOINT probe');
      await holder.query('COMMIT');
      expect((await parked).map((r) => (r as { status?: string } | null)?.status)).toEqual(['waiting', 'waiting']);
    } finally {
      await holder.end();
      await store.close();
    }
  });
});
