/**
 * @module sqlite/signals
 * Internal: not part of the public API.
 * A signal sent to a task on SQLite: stored once per idempotency key, with its log entry; a task
 * that waits for it becomes due at once.
 */
import { notAwaited } from '../store-sql/guards.ts';
import { signalReceivedEntry } from '../log-entries.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { SignalInsert, SignalWrite } from '../store.ts';
import type { SqliteContext } from './context.ts';

export function insertSignal(c: SqliteContext, s: SignalWrite): SignalInsert | null {
  return c.tx(() => insertSignalNow(c, s));
}

/** {@link insertSignal} inside the caller's write transaction (a finished child's signal to its parent). */
export function insertSignalNow(c: SqliteContext, s: SignalWrite): SignalInsert | null {
  const task = c.stmt('SELECT no, status, wait_events FROM stepwise_tasks WHERE id = ?').get(s.taskId) as { no: number; status: TaskStatus; wait_events: string | null } | undefined;
  if (!task) return null;
  const refused = notAwaited(s, task.status, task.wait_events);
  if (refused) return refused;
  const res = c
    .stmt(
      `INSERT INTO stepwise_signals (task_id, name, payload, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id, idempotency_key) DO NOTHING`,
    )
    .run(s.taskId, s.name, s.payload, s.idempotencyKey, s.at);
  if (res.changes === 1) {
    // Taken by a signal that must be the only one of its wait: it waits for nothing more.
    c.stmt(`UPDATE stepwise_tasks SET run_at = ?, wait_events = CASE WHEN ? THEN NULL ELSE wait_events END WHERE id = ? AND instr(wait_events, '|' || ? || '|') > 0`).run(
      s.at,
      s.onlyIfAwaited ? 1 : 0,
      s.taskId,
      s.name,
    );
    const signalId = Number(res.lastInsertRowid);
    c.append(task.no, s.at, [signalReceivedEntry(s.actorKind, s.actorId, { signalId, name: s.name, payload: s.payload, idempotencyKey: s.idempotencyKey })]);
  }
  return { created: res.changes === 1 };
}
