// Ending a dead worker's leases on PostgreSQL (`endLeasesOf`) locks its tasks in id order, as every
// multi-row writer does. In scan order it could hold a task of higher id while it waited for one of
// lower id, and a write batch over the same tasks, locking in id order, would deadlock with it.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { planCreation } from '../src/transitions.ts';
import { claimOf } from './support/claims.ts';
import { eventually } from './support/engine.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_endlocks');
afterAll(async () => {
  if (await hasPostgres()) await dropSchema(schema);
});

describe.skipIf(!(await hasPostgres()))('ending a dead worker’s leases on PostgreSQL', () => {
  it('locks the tasks in id order: waiting for one, it holds none of higher id', async () => {
    const store = new PostgresStore(PG_URL, { schema });
    await store.migrate();
    const holder = new pg.Client({ connectionString: PG_URL });
    const other = new pg.Client({ connectionString: PG_URL });
    const watcher = new pg.Client({ connectionString: PG_URL });
    await Promise.all([holder.connect(), other.connect(), watcher.connect()]);
    try {
      for (const id of ['a', 'b', 'c']) {
        await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: null, idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'anonymous' }) });
      }
      expect(await store.claim(claimOf('dead', T0))).toHaveLength(3);
      // b's lease is moved later: a scan of the table, or of the leased tasks by expiry, meets it after c.
      await holder.query(`UPDATE "${schema}".tasks SET lease_expires_at = lease_expires_at + 1000 WHERE id = 'b'`);
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${schema}".tasks WHERE id = 'b' FOR UPDATE`);
      const ended = store.endLeasesOf('dead', T0 + 1);
      await eventually(
        async () => {
          const { rows } = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%SET lease_expires_at%' AND query LIKE $1`, [
            `%"${schema}".tasks%`,
          ]);
          return rows.length > 0;
        },
        10_000,
        'the end of the leases waiting for the lock on b',
      );
      // c comes after b in id order: it is not locked yet.
      await other.query('BEGIN');
      const { rows } = await other.query(`SELECT id FROM "${schema}".tasks WHERE id = 'c' FOR UPDATE NOWAIT`);
      expect(rows).toEqual([{ id: 'c' }]);
      await other.query('ROLLBACK');
      await holder.query('COMMIT');
      expect(await ended).toBe(3);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await other.query('ROLLBACK').catch(() => undefined);
      await Promise.all([holder.end(), other.end(), watcher.end()]);
      await store.close();
    }
  });
});
