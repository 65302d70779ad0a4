// Upgrading an existing SQLite file: later migrations keep the data of earlier ones.
import { expectHistoryCopiedToLog } from './support/migrated-history.ts';
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Engine } from '../src/index.ts';
import { upgradeWorkflow } from './fixtures/upgrade-workflow.ts';
import { sqliteMigrations } from '../src/generated/sql.ts';
import { migrateSqlite } from '../src/sqlite/migrate.ts';
import { SqliteStore } from '../src/sqlite/store.ts';
import { startWorker, tempDir } from './support/engine.ts';

describe('SQLite migrations', () => {
  it('upgrades a file written under migration 1 without losing tasks or journal rows, and the engine resumes its task', async () => {
    const file = join(tempDir(), 'v1.db');
    const old = new Database(file);
    old.pragma('journal_mode = WAL');
    migrateSqlite(old, 1_000, sqliteMigrations.slice(0, 1));
    // A task interrupted after its first step, as an engine of migration 1 left it.
    // (Its first run was claimed once, at epoch 1, and handed back when its worker stopped.)
    old.exec(`INSERT INTO stepwise_tasks (no, id, workflow, workflow_version, status, input, created_at, updated_at, run_at, runs, epoch)
      VALUES (7, 'task-from-v1', 'upgrade', '1', 'pending', '{"n":2}', 1000, 1000, 1000, 1, 1);
      INSERT INTO stepwise_steps (task_no, seq, name, kind, status, output, attempts, started_at, finished_at, epoch, done)
      VALUES (7, 0, 'first', 'step', 'completed', '"from v1"', 1, 1000, 1001, 1, 1);`);
    old.close();

    const { wf, firstRuns } = upgradeWorkflow();
    const engine = new Engine({ store: `sqlite:${file}`, workflows: [wf] });
    try {
      await engine.ready();
      const db = new Database(file, { readonly: true });
      try {
        expect(db.prepare('SELECT id FROM stepwise_migrations ORDER BY id').all()).toEqual(sqliteMigrations.map((m) => ({ id: m.id })));
        // The rebuilt journal still refuses a row that is not a step, sleep or event.
        const ddl = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'stepwise_steps'`).get() as { sql: string }).sql;
        expect(ddl).toContain(`kind = 'step' OR kind = 'sleep' OR kind = 'event'`);
      } finally {
        db.close();
      }
      await startWorker(engine);
      expect(await engine.result('task-from-v1', { timeout: '10s' })).toBe('from v1/4');
      expect(firstRuns()).toBe(0); // its checkpoint survived the upgrade
    } finally {
      await engine.close();
    }
  });

  it('upgrades a file written under migration 2: its history becomes the event log, and new entries follow it', async () => {
    const file = join(tempDir(), 'v2.db');
    const old = new Database(file);
    old.pragma('journal_mode = WAL');
    migrateSqlite(old, 1_000, sqliteMigrations.slice(0, 2));
    old.exec(`INSERT INTO stepwise_tasks (no, id, workflow, workflow_version, status, created_at, updated_at, run_at, runs, epoch)
      VALUES (3, 'old-a', 'w', '1', 'pending', 1000, 1000, 1000, 2, 2), (9, 'old-b', 'w', '1', 'succeeded', 1000, 1000, NULL, 1, 1);
      INSERT INTO stepwise_history (task_id, at, event, from_status, to_status, epoch, worker_id, detail) VALUES
        ('old-a', 1000, 'create', NULL, 'pending', 0, NULL, NULL),
        ('old-b', 1001, 'create', NULL, 'pending', 0, NULL, NULL),
        ('old-a', 1002, 'claim', 'pending', 'running', 1, 'w-1', NULL),
        ('old-b', 1003, 'claim', 'pending', 'running', 1, 'w-1', NULL),
        ('old-a', 1004, 'abort', 'running', 'pending', 1, NULL, '{"reason":"lease expired","previousOwner":"w-1"}'),
        ('old-b', 1005, 'complete', 'running', 'succeeded', 1, 'w-1', NULL),
        ('old-a', 1006, 'pause', 'pending', 'paused', 1, NULL, '{"why":"ops"}');`);
    old.close();
    const store = new SqliteStore(file);
    try {
      await store.migrate();
      await expectHistoryCopiedToLog(store);
      expect(store.db.prepare(`SELECT name FROM sqlite_master WHERE name = 'stepwise_history'`).get()).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('the upgraded journal still refuses a kind or status the engine never writes', () => {
    const db = new Database(join(tempDir(), 'checks.db'));
    try {
      migrateSqlite(db, 1_000);
      const insert = (kind: string, status: string) =>
        db.prepare(`INSERT INTO stepwise_steps (task_no, seq, name, kind, status, epoch) VALUES (1, ?, 'x', ?, ?, 1)`).run(Math.random(), kind, status);
      expect(() => insert('step', 'completed')).not.toThrow();
      expect(() => insert('lunch', 'completed')).toThrow(/CHECK constraint failed/);
      expect(() => insert('step', 'half-done')).toThrow(/CHECK constraint failed/);
    } finally {
      db.close();
    }
  });

  it('a migration that finds the file busy without waiting for it (SQLITE_BUSY) tries again, and applies each migration once', async () => {
    const file = join(tempDir(), 'busy.db');
    const holder = new Database(file);
    holder.pragma('journal_mode = WAL');
    holder.exec('CREATE TABLE other (x INTEGER)');
    holder.exec('BEGIN IMMEDIATE'); // another process holds the write lock
    // No busy timeout: SQLite answers SQLITE_BUSY at once, as it does for some waits in WAL mode.
    const store = new SqliteStore(file, { busyTimeoutMs: 0 });
    try {
      // Its first attempt runs (and meets the lock) before migrate() returns; the others wait out the holder.
      const migrating = store.migrate();
      await new Promise((r) => setTimeout(r, 200));
      holder.exec('COMMIT');
      await migrating;
      const rows = holder.prepare('SELECT id FROM stepwise_migrations ORDER BY id').all() as Array<{ id: number }>;
      expect(rows.map((r) => r.id)).toEqual(sqliteMigrations.map((m) => m.id));
    } finally {
      await store.close();
      holder.close();
    }
  });
});
