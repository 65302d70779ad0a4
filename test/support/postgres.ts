// PostgreSQL for tests: where it is, whether it is up, and a fresh schema per test file.
import pg from 'pg';
import { randomBytes } from 'node:crypto';

export const PG_URL = process.env.STEPWISE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export async function postgresAvailability(): Promise<{ ok: boolean; url: string; reason?: string }> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return { ok: true, url: PG_URL };
  } catch (e) {
    return { ok: false, url: PG_URL, reason: (e as Error).message };
  } finally {
    await client.end().catch(() => undefined);
  }
}

let cached: Promise<boolean> | undefined;
/** Whether PostgreSQL suites should run (checked once per test file). */
export function hasPostgres(): Promise<boolean> {
  cached ??= postgresAvailability().then((a) => a.ok);
  return cached;
}

/** A schema name no other test uses. */
export function freshSchemaName(prefix = 'sw_test'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/** `fn` with a client of its own on the test database, closed afterwards. */
export async function withPg<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The rows of one statement, run on a client of its own. */
export function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  return withPg(async (c) => (await c.query<T>(text, values)).rows);
}

export async function dropSchema(schema: string): Promise<void> {
  await withPg((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
}

/**
 * Resolves once another backend, running a statement that names `schema`, waits for a lock: polled
 * on `client` (which may hold the lock in an open transaction) every 10 ms.
 */
export async function untilLockWaitIn(client: pg.ClientBase, schema: string): Promise<void> {
  for (;;) {
    const { rows } = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.query LIKE $1 AND a.pid <> pg_backend_pid()`,
      [`%${schema}%`],
    );
    if (Number(rows[0]?.n) > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}
