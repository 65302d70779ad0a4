/**
 * @module postgres/migrate
 * Internal: not part of the public API (the package exports only its index modules).
 * Applies the numbered migrations of `sql/postgres/` to one schema inside one transaction that
 * first takes `pg_advisory_xact_lock` on a key derived from the schema name. Two processes that
 * migrate at once therefore migrate once: the second waits for the lock, then (its next statement
 * sees the first one's commit) finds every migration applied. Each migration's row is inserted
 * before its SQL runs, so a migrator that somehow got past the lock would collide on the primary
 * key and roll back rather than apply a migration twice. A schema that has a breaking migration
 * this version does not know is refused with {@link SchemaMismatchError}.
 */
import type { ClientBase } from 'pg';
import { postgresMigrations, type Migration } from '../generated/sql.ts';
import { checkApplied } from '../migrations.ts';

/** The placeholder in `sql/postgres/*.sql` that stands for the quoted schema name. */
export const SCHEMA_PLACEHOLDER = ':SCHEMA';

/** `"name"`: the schema name as a quoted identifier (the name was validated by the store). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A migration's SQL for one schema. */
export function migrationSql(migration: Migration, schema: string): string {
  return migration.sql.replaceAll(SCHEMA_PLACEHOLDER, quoteIdent(schema));
}

/**
 * Migrates `schema` on `client` (a connected client that is not in a transaction); returns the
 * number of migrations applied.
 */
export async function migratePostgres(client: ClientBase, schema: string, now: number, migrations: readonly Migration[] = postgresMigrations): Promise<number> {
  const s = quoteIdent(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`stepwise:migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.migrations (
      id INTEGER PRIMARY KEY, name TEXT NOT NULL, breaking BOOLEAN NOT NULL, applied_at BIGINT NOT NULL, checksum TEXT)`);
    await client.query(`ALTER TABLE ${s}.migrations ADD COLUMN IF NOT EXISTS checksum TEXT`);
    const applied = (await client.query<{ id: number; name: string; breaking: boolean; checksum: string | null }>(`SELECT id, name, breaking, checksum FROM ${s}.migrations ORDER BY id`))
      .rows;
    checkApplied(`The database schema ${s}`, applied, migrations);
    const done = new Set(applied.map((a) => a.id));
    let count = 0;
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      await client.query(`INSERT INTO ${s}.migrations (id, name, breaking, applied_at, checksum) VALUES ($1, $2, $3, $4, $5)`, [m.id, m.name, m.breaking, now, m.checksum]);
      await client.query(migrationSql(m, schema));
      count++;
    }
    await client.query('COMMIT');
    return count;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}
