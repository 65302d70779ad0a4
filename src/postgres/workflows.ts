/**
 * @module postgres/workflows
 * Internal: not part of the public API.
 * The registry of workflow versions on PostgreSQL: workers record the (name, version) pairs they
 * serve, with when each was first and last seen; the CLI lists them.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import type { WorkerPresence, WorkflowRegistration } from '../store.ts';

export async function registerWorkflows(c: PgContext, workflows: readonly WorkflowRegistration[]): Promise<void> {
  if (!workflows.length) return;
  // One row per (name, version): first registration time, last seen time (as a loop of upserts would).
  const merged = new Map<string, { name: string; version: string; first: number; last: number }>();
  for (const w of workflows) {
    const key = JSON.stringify([w.name, w.version]);
    const m = merged.get(key);
    if (m) m.last = w.at;
    else merged.set(key, { name: w.name, version: w.version, first: w.at, last: w.at });
  }
  const list = [...merged.values()];
  await run(c, () =>
    poolOf(c).query(
      `INSERT INTO ${c.t.workflows} (name, version, registered_at, last_seen_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
         ON CONFLICT (name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
      [list.map((r) => r.name), list.map((r) => r.version), list.map((r) => r.first), list.map((r) => r.last)],
    ),
  );
}

export async function listWorkflows(c: PgContext): Promise<Array<{ name: string; version: string; lastSeenAt: number }>> {
  return run(c, async () =>
    (await rows(c, poolOf(c), `SELECT name, version, last_seen_at FROM ${c.t.workflows} ORDER BY name COLLATE "C", version COLLATE "C"`)).map((r) => ({
      name: String(r.name),
      version: String(r.version),
      lastSeenAt: Number(r.last_seen_at),
    })),
  );
}

export async function recordPresence(c: PgContext, p: WorkerPresence, forgetBefore: number): Promise<void> {
  await run(c, () =>
    poolOf(c).query(
      `WITH gone AS (DELETE FROM ${c.t.workersServed} WHERE last_seen_at < $5::bigint)
       INSERT INTO ${c.t.workersServed} (worker_id, name, version, started_at, last_seen_at)
         SELECT $1::text, n, v, $4::bigint, $4::bigint FROM unnest($2::text[], $3::text[]) AS s(n, v)
         ON CONFLICT (worker_id, name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
      [p.workerId, p.served.map((s) => s.name), p.served.map((s) => s.version), p.at, forgetBefore],
    ),
  );
}

export async function removePresence(c: PgContext, workerId: string): Promise<void> {
  await run(c, () => poolOf(c).query(`DELETE FROM ${c.t.workersServed} WHERE worker_id = $1::text`, [workerId]));
}

export async function servedVersions(c: PgContext, workflow: string, seenSince: number): Promise<string[]> {
  return run(c, async () =>
    (
      await rows(c, poolOf(c), `SELECT DISTINCT version COLLATE "C" AS version FROM ${c.t.workersServed} WHERE name = $1::text AND last_seen_at >= $2::bigint ORDER BY 1`, [
        workflow,
        seenSince,
      ])
    ).map((r) => String(r.version)),
  );
}
