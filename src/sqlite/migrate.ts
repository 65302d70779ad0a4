/**
 * @module sqlite/migrate
 * Internal: not part of the public API (the package exports only its index modules).
 * Applies the numbered migrations of `sql/sqlite/` inside one `BEGIN IMMEDIATE` transaction, so two
 * processes opening the same file at once migrate it once: the second waits for the write lock,
 * then finds the migrations applied. Each migration's row is inserted before its SQL runs.
 * A schema with a breaking migration this version does not know, or with a migration whose text
 * changed since it was applied, is refused (see migrations.ts).
 */
import type Database from 'better-sqlite3';
import { sqliteMigrations, type Migration } from '../generated/sql.ts';
import { checkApplied } from '../migrations.ts';

export function migrateSqlite(db: Database.Database, now: number, migrations: readonly Migration[] = sqliteMigrations): number {
  const run = db.transaction(() => {
    db.exec(`CREATE TABLE IF NOT EXISTS stepwise_migrations (
      id INTEGER PRIMARY KEY, name TEXT NOT NULL, breaking INTEGER NOT NULL, applied_at INTEGER NOT NULL, checksum TEXT)`);
    const columns = (db.prepare('PRAGMA table_info(stepwise_migrations)').all() as Array<{ name: string }>).map((c) => c.name);
    if (!columns.includes('checksum')) db.exec('ALTER TABLE stepwise_migrations ADD COLUMN checksum TEXT');
    const applied = (
      db.prepare('SELECT id, name, breaking, checksum FROM stepwise_migrations ORDER BY id').all() as Array<{
        id: number;
        name: string;
        breaking: number;
        checksum: string | null;
      }>
    ).map((a) => ({ ...a, breaking: a.breaking === 1 }));
    checkApplied('The database', applied, migrations);
    const done = new Set(applied.map((a) => a.id));
    let count = 0;
    const insert = db.prepare('INSERT INTO stepwise_migrations (id, name, breaking, applied_at, checksum) VALUES (?, ?, ?, ?, ?)');
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      insert.run(m.id, m.name, m.breaking ? 1 : 0, now, m.checksum);
      db.exec(m.sql);
      count++;
    }
    return count;
  });
  return run.immediate();
}
