// Upgrading an existing PostgreSQL schema: later migrations keep the data of earlier ones.
import { expectHistoryCopiedToLog } from './support/migrated-history.ts';
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { postgresMigrations } from '../src/generated/sql.ts';
import { upgradeWorkflow } from './fixtures/upgrade-workflow.ts';
import { migratePostgres } from '../src/postgres/migrate.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import { PG_URL, hasPostgres, withPg } from './support/postgres.ts';
import { schemasOfThisFile, startWorker } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_migrate');

describe.skipIf(!(await hasPostgres()))('PostgreSQL migrations', () => {
  it('upgrades a schema written under migration 1 without losing tasks or journal rows, and the engine resumes its task', async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await migratePostgres(c, schema, 1_000, postgresMigrations.slice(0, 1));
      // A task interrupted after its first step, as an engine of migration 1 left it (claimed
      // once, at epoch 1, and handed back when its worker stopped).
      await c.query(`INSERT INTO "${schema}".tasks (id, workflow, workflow_version, status, input, created_at, updated_at, run_at, runs, epoch)
        VALUES ('task-from-v1', 'upgrade', '1', 'pending', '{"n":2}', 1000, 1000, 1000, 1, 1)`);
      await c.query(`INSERT INTO "${schema}".steps (task_id, seq, name, kind, status, output, attempts, started_at, finished_at, epoch, done)
        VALUES ('task-from-v1', 0, 'first', 'step', 'completed', '"from v1"', 1, 1000, 1001, 1, 1)`);
    });
    const { wf, firstRuns } = upgradeWorkflow();
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [wf] });
    try {
      await engine.ready();
      const applied = await withPg(async (c) => (await c.query(`SELECT id FROM "${schema}".migrations ORDER BY id`)).rows);
      expect(applied).toEqual(postgresMigrations.map((m) => ({ id: m.id })));
      await startWorker(engine);
      expect(await engine.result('task-from-v1', { timeout: '10s' })).toBe('from v1/4');
      expect(firstRuns()).toBe(0); // its checkpoint survived the upgrade
      const steps = (await engine.get('task-from-v1')).steps.map((s) => [s.name, s.status]);
      expect(steps).toEqual([
        ['first', 'completed'],
        ['second', 'completed'],
      ]);
    } finally {
      await engine.close();
    }
  });

  it('upgrades a schema written under migration 2: its history becomes the event log, and new entries follow it', async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await migratePostgres(c, schema, 1_000, postgresMigrations.slice(0, 2));
      await c.query(`INSERT INTO "${schema}".tasks (id, workflow, workflow_version, status, created_at, updated_at, run_at, runs, epoch)
        VALUES ('old-a', 'w', '1', 'pending', 1000, 1000, 1000, 2, 2), ('old-b', 'w', '1', 'succeeded', 1000, 1000, NULL, 1, 1)`);
      // Interleaved rows of two tasks, as the history table held them.
      await c.query(`INSERT INTO "${schema}".history (task_id, at, event, from_status, to_status, epoch, worker_id, detail) VALUES
        ('old-a', 1000, 'create', NULL, 'pending', 0, NULL, NULL),
        ('old-b', 1001, 'create', NULL, 'pending', 0, NULL, NULL),
        ('old-a', 1002, 'claim', 'pending', 'running', 1, 'w-1', NULL),
        ('old-b', 1003, 'claim', 'pending', 'running', 1, 'w-1', NULL),
        ('old-a', 1004, 'abort', 'running', 'pending', 1, NULL, '{"reason":"lease expired","previousOwner":"w-1"}'),
        ('old-b', 1005, 'complete', 'running', 'succeeded', 1, 'w-1', NULL),
        ('old-a', 1006, 'pause', 'pending', 'paused', 1, NULL, '{"why":"ops"}')`);
    });
    const store = new PostgresStore(PG_URL, { schema });
    try {
      await store.migrate();
      await expectHistoryCopiedToLog(store);
      const gone = await withPg(async (c) => (await c.query(`SELECT to_regclass($1) AS t`, [`"${schema}".history`])).rows[0].t);
      expect(gone).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('keeps working when a later migration changes column types under its prepared statements', async () => {
    const schema = freshSchema();
    const wf = workflow('retype', async (ctx, input: { n: number }) => ctx.step('double', () => input.n * 2));
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}&poolSize=3`, workflows: [wf] });
    try {
      await startWorker(engine);
      const first = await engine.start(wf, { n: 1 });
      expect(await engine.result(first.id, { timeout: '10s' })).toBe(2);
      // Prepare the reads on every pooled connection.
      await Promise.all([1, 2, 3].map(() => engine.get(first.id)));
      // Another process changes the types of columns that `SELECT *` and `RETURNING *` return.
      await withPg(async (c) => {
        await c.query(`CREATE DOMAIN "${schema}".note AS TEXT`);
        await c.query(`ALTER TABLE "${schema}".steps ALTER COLUMN error TYPE "${schema}".note`);
        await c.query(`ALTER TABLE "${schema}".tasks ALTER COLUMN cancel_reason TYPE "${schema}".note`);
      });
      // Each connection's statements are now stale; the store replaces the connections and goes on.
      for (let i = 0; i < 4; i++) expect((await engine.get(first.id)).steps).toHaveLength(1);
      const second = await engine.start(wf, { n: 5 });
      expect(await engine.result(second.id, { timeout: '10s' })).toBe(10);
    } finally {
      await engine.close();
    }
  });

  it('the upgraded journal still refuses a kind or status the engine never writes', async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await migratePostgres(c, schema, 1_000);
      let seq = 0;
      const insert = (kind: string, status: string): Promise<unknown> =>
        c.query(`INSERT INTO "${schema}".steps (task_id, seq, name, kind, status, epoch) VALUES ('t', $1, 'x', $2, $3, 1)`, [seq++, kind, status]);
      await expect(insert('step', 'completed')).resolves.toBeDefined();
      await expect(insert('lunch', 'completed')).rejects.toMatchObject({ code: '23514' }); // check_violation
      await expect(insert('step', 'half-done')).rejects.toMatchObject({ code: '23514' });
    });
  });

  it("refuses a schema where the application already has a table Stepwise creates, naming the table and the ?schema= option, and leaves the application's table alone", async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await c.query(`CREATE SCHEMA "${schema}"`);
      await c.query(`CREATE TABLE "${schema}".events (id serial PRIMARY KEY, title text)`);
      await c.query(`INSERT INTO "${schema}".events (title) VALUES ('launch party')`);
    });
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}` });
    try {
      const error = await engine.ready().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'SCHEMA_MISMATCH' });
      expect((error as Error).message).toContain(`already has table "events"`);
      expect((error as Error).message).toContain('?schema=');
    } finally {
      await engine.close();
    }
    await withPg(async (c) => {
      expect((await c.query(`SELECT title FROM "${schema}".events`)).rows).toEqual([{ title: 'launch party' }]);
      // Nothing of Stepwise's was left half-made: the migration ran in one transaction.
      const tables = (await c.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema])).rows.map((r) => r.table_name);
      expect(tables).toEqual(['events']);
    });
  });

  it("refuses another tool's migrations table in the schema instead of writing into it", async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await c.query(`CREATE SCHEMA "${schema}"`);
      await c.query(`CREATE TABLE "${schema}".migrations (id serial PRIMARY KEY, name text, run_on timestamptz)`);
    });
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}` });
    try {
      const error = await engine.ready().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'SCHEMA_MISMATCH' });
      expect((error as Error).message).toContain('table "migrations" that is not Stepwise\'s');
    } finally {
      await engine.close();
    }
    await withPg(async (c) => {
      const columns = (await c.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'migrations' ORDER BY 1`, [schema])).rows;
      expect(columns.map((r) => r.column_name)).toEqual(['id', 'name', 'run_on']); // no checksum column added
    });
  });
});
