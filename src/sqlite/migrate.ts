/**
 * @module sqlite/migrate
 * @internal
 * Applies the numbered migrations of `sql/sqlite/` inside one `BEGIN IMMEDIATE` transaction, so two
 * processes opening the same file at once migrate it once: the second waits for the write lock,
 * then finds the migrations applied. Each migration's row is inserted before its SQL runs.
 * A schema that has a breaking migration this version does not know is refused.
 */
import type Database from 'better-sqlite3';
import { sqliteMigrations, type Migration } from '../generated/sql.ts';
import { SchemaMismatchError } from '../errors.ts';

export function migrateSqlite(db: Database.Database, now: number, migrations: readonly Migration[] = sqliteMigrations): number {
  const run = db.transaction(() => {
    db.exec(`CREATE TABLE IF NOT EXISTS stepwise_migrations (
      id INTEGER PRIMARY KEY, name TEXT NOT NULL, breaking INTEGER NOT NULL, applied_at INTEGER NOT NULL)`);
    const applied = db.prepare('SELECT id, name, breaking FROM stepwise_migrations ORDER BY id').all() as Array<{ id: number; name: string; breaking: number }>;
    const known = new Map(migrations.map((m) => [m.id, m]));
    const unknownBreaking = applied.find((a) => !known.has(a.id) && a.breaking === 1);
    if (unknownBreaking) {
      throw new SchemaMismatchError(
        `The database schema has breaking migration ${unknownBreaking.id} (${unknownBreaking.name}), newer than this version of Stepwise understands. Upgrade Stepwise.`,
      );
    }
    const done = new Set(applied.map((a) => a.id));
    let count = 0;
    const insert = db.prepare('INSERT INTO stepwise_migrations (id, name, breaking, applied_at) VALUES (?, ?, ?, ?)');
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      insert.run(m.id, m.name, m.breaking ? 1 : 0, now);
      db.exec(m.sql);
      count++;
    }
    return count;
  });
  return run.immediate();
}
