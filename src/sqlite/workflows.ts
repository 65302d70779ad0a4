/**
 * @module sqlite/workflows
 * Internal: not part of the public API.
 * The workflows (name and version) that workers have registered, with when each was last seen.
 */
import type { WorkerPresence, WorkflowRegistration } from '../store.ts';
import type { Raw, SqliteContext } from './context.ts';

export function registerWorkflows(c: SqliteContext, workflows: readonly WorkflowRegistration[]): void {
  if (!workflows.length) return;
  c.tx(() => {
    for (const w of workflows) {
      c.stmt(
        `INSERT INTO stepwise_workflows (name, version, registered_at, last_seen_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
      ).run(w.name, w.version, w.at, w.at);
    }
  });
}

export function listWorkflows(c: SqliteContext): Array<{ name: string; version: string; lastSeenAt: number }> {
  return (c.stmt('SELECT name, version, last_seen_at FROM stepwise_workflows ORDER BY name, version').all() as Raw[]).map((r) => ({
    name: String(r.name),
    version: String(r.version),
    lastSeenAt: Number(r.last_seen_at),
  }));
}

export function recordPresence(c: SqliteContext, p: WorkerPresence, forgetBefore: number): void {
  c.tx(() => {
    c.stmt('DELETE FROM stepwise_workers_served WHERE last_seen_at < ?').run(forgetBefore);
    for (const s of p.served) {
      c.stmt(
        `INSERT INTO stepwise_workers_served (worker_id, name, version, started_at, last_seen_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (worker_id, name, version) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
      ).run(p.workerId, s.name, s.version, p.at, p.at);
    }
  });
}

export function removePresence(c: SqliteContext, workerId: string): void {
  c.tx(() => c.stmt('DELETE FROM stepwise_workers_served WHERE worker_id = ?').run(workerId));
}

export function servedVersions(c: SqliteContext, workflow: string, seenSince: number): string[] {
  const rows = c.stmt('SELECT DISTINCT version FROM stepwise_workers_served WHERE name = ? AND last_seen_at >= ? ORDER BY version').all(workflow, seenSince) as Raw[];
  return rows.map((r) => String(r.version));
}
