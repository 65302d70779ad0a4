// A heartbeat on PostgreSQL locks only the rows whose leases it renews. A task whose run has just
// parked is due to be claimed at once (its signal came while it ran), and a claim skips locked
// rows: a heartbeat in flight that still named the task, and locked it while it waited for
// another row, made the claim miss it, and the task waited for the next poll (a minute, say).
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation } from '../src/transitions.ts';
import { claimOf } from './support/claims.ts';
import { eventually } from './support/engine.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_hblocks');
afterAll(async () => {
  if (await hasPostgres()) await dropSchema(schema);
});

describe.skipIf(!(await hasPostgres()))('heartbeats on PostgreSQL', () => {
  it('a renewal waiting for one held row does not lock a task that has parked since: another claim takes it meanwhile', async () => {
    const store = new PostgresStore(PG_URL, { schema });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    // pg_stat_activity is read once per transaction and kept until it ends, so the watcher is a
    // connection of its own, outside the holder's open transaction.
    const watcher = new pg.Client({ connectionString: PG_URL });
    await watcher.connect();
    try {
      for (const id of ['a-parked', 'b-held']) {
        await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: null, idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'anonymous' }) });
      }
      const claimed = await store.claim(claimOf('w1', T0));
      const epochOf = (id: string) => claimed.find((c) => c.task.id === id)?.task.epoch as number;
      expect(claimed).toHaveLength(2);
      // a-parked parks, due at once; the heartbeat below still names it (it was sent before the park's answer).
      const parked = await store.transition({
        kind: 'transition',
        taskId: 'a-parked',
        event: 'park',
        from: ['running'],
        to: 'waiting',
        guard: { epoch: epochOf('a-parked') },
        set: { clearLease: true, runAt: T0 + 1 },
        at: T0 + 1,
        log: [],
      });
      expect(parked).toMatchObject({ status: 'waiting', leaseOwner: null });
      // Another transaction holds b-held: the renewal waits for it, past a-parked in id order.
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${schema}".tasks WHERE id = 'b-held' FOR UPDATE`);
      const renewal = store.heartbeat({
        workerId: 'w1',
        now: T0 + 2,
        leaseMs: 60_000,
        held: [
          { taskId: 'a-parked', epoch: epochOf('a-parked') },
          { taskId: 'b-held', epoch: epochOf('b-held') },
        ],
      });
      await eventually(
        async () => {
          const { rows } = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%unnest($2::text[], $3::integer[])%' AND query LIKE $1`, [
            `%"${schema}".tasks%`,
          ]);
          return rows.length > 0;
        },
        10_000,
        'the renewal waiting for the lock on b-held',
      );
      const again = await store.claim(claimOf('w2', T0 + 3));
      expect(again.map((c) => c.task.id)).toEqual(['a-parked']);
      await holder.query('COMMIT');
      expect((await renewal).map((h) => h.taskId)).toEqual(['b-held']);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await watcher.end();
      await store.close();
    }
  });
});
