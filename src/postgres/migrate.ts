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
import { SchemaMismatchError } from '../errors.ts';

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
    await checkMigrationsTable(client, schema);
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
      await checkCollisions(client, schema, m);
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

/** The columns that make a schema's `migrations` table Stepwise's own. */
const MIGRATIONS_COLUMNS = ['id', 'name', 'breaking', 'applied_at'];

function collisionAdvice(schema: string): string {
  return (
    `Stepwise keeps its tables in a schema of its own: give it one the application does not use with ?schema=<name> in the store URL ` +
    `(the default is "stepwise"; "${schema}" was asked for).`
  );
}

/** Refuses a `migrations` table of the schema that is not Stepwise's (another tool's migration log). */
async function checkMigrationsTable(client: ClientBase, schema: string): Promise<void> {
  const { rows } = await client.query<{ column_name: string }>('SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2', [schema, 'migrations']);
  if (!rows.length) return;
  const columns = new Set(rows.map((r) => r.column_name));
  if (MIGRATIONS_COLUMNS.every((c) => columns.has(c))) return;
  throw new SchemaMismatchError(
    `The schema "${schema}" already has a table "migrations" that is not Stepwise's (columns: ${[...columns].join(', ')}); Stepwise would record its own migrations there. ${collisionAdvice(schema)}`,
  );
}

/** The tables and indexes a migration creates (their names are unqualified in the schema). */
export function createdRelations(migration: Migration): string[] {
  const names: string[] = [];
  for (const m of migration.sql.matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?:SCHEMA\.(\w+)/gi)) names.push(m[1]!);
  for (const m of migration.sql.matchAll(/CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON/gi)) names.push(m[1]!);
  return names;
}

/**
 * Refuses to apply migrations whose tables or indexes already exist in the schema as someone
 * else's (an application table named `events` in the same schema): the migration would fail
 * halfway with a bare "relation already exists", or build on a table it does not own.
 */
async function checkCollisions(client: ClientBase, schema: string, migration: Migration): Promise<void> {
  const names = createdRelations(migration);
  if (!names.length) return;
  const { rows } = await client.query<{ relname: string; kind: string }>(
    `SELECT c.relname, c.relkind AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) ORDER BY c.relname`,
    [schema, names],
  );
  if (!rows.length) return;
  const what = rows.map((r) => `${r.kind === 'i' ? 'index' : 'table'} "${r.relname}"`).join(', ');
  throw new SchemaMismatchError(`The schema "${schema}" already has ${what}, which Stepwise's migrations create: they belong to something else. ${collisionAdvice(schema)}`);
}
