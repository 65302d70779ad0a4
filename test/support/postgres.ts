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
 * Resolves once another backend waits for a lock that `holder` holds (`pg_blocking_pids`, read from
 * the lock manager itself, so it does not depend on what pg_stat_activity shows of the waiter),
 * polled on `holder` (in its open transaction) every 10 ms; throws after `ms`, with the lock waits
 * of the moment, so that a test waiting for a wait that never comes fails with what it saw.
 */
export async function untilBlockedBy(holder: pg.ClientBase, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { rows } = await holder.query<{ n: string }>(
      `SELECT count(*) AS n FROM (SELECT DISTINCT pid FROM pg_locks WHERE NOT granted) w WHERE pg_backend_pid() = ANY (pg_blocking_pids(w.pid))`,
    );
    if (Number(rows[0]?.n) > 0) return;
    if (Date.now() > deadline) {
      const waits = await holder.query(
        `SELECT l.pid, l.locktype, l.mode, pg_blocking_pids(l.pid) AS blocked_by, left(a.query, 120) AS query FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted`,
      );
      throw new Error(
        `no backend waited for a lock of backend ${String((await holder.query('SELECT pg_backend_pid() AS p')).rows[0]?.p)} within ${ms} ms; lock waits: ${JSON.stringify(waits.rows)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}
