/**
 * @module sqlite/workflows
 * Internal: not part of the public API.
 * The workflows (name and version) that workers have registered, with when each was last seen.
 */
import type { WorkflowRegistration } from '../store.ts';
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
