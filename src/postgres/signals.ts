/**
 * @module postgres/signals
 * Internal: not part of the public API.
 * Sending a signal on PostgreSQL: the signal row, the task made due if it waits for that name,
 * the `signal:received` log entry and the wake-up, in one transaction that locks the task first.
 */
import { rows, run, tx, type Db, type PgContext } from './connection.ts';
import { channelOf, listenerName, notifySql } from './listen.ts';
import { payload } from './wake.ts';
import { signalReceivedEntry } from '../log-entries.ts';
import type { SignalInsert, SignalWrite } from '../store.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { notAwaited } from '../store-sql/guards.ts';

/**
 * Locks the task row first (so a concurrent transition that sets `wait_events` is either seen by
 * the wake-up UPDATE, or sees this signal: see transition.ts). A new signal bumps the task's
 * log counter and appends its `signal:received` entry. With `onlyIfAwaited`, the status and
 * awaited events read under that lock decide, and a recorded signal clears the awaited events.
 */
export async function insertSignal(c: PgContext, s: SignalWrite): Promise<SignalInsert | null> {
  return run(c, () => tx(c, (client) => insertSignalOn(c, client, s)));
}

/** {@link insertSignal} on a client in the caller's transaction (a finished child's signal to its parent). */
export async function insertSignalOn(c: PgContext, client: Db, s: SignalWrite): Promise<SignalInsert | null> {
  // The entry's data after its signal id (known only once the row is inserted).
  const prefix = '{"signalId":0';
  const receivedTail = signalReceivedEntry(s.actorKind, s.actorId, { signalId: 0, name: s.name, payload: s.payload, idempotencyKey: s.idempotencyKey }).data?.slice(prefix.length);
  const [task] = await rows(c, client, `SELECT status, wait_events FROM ${c.t.tasks} WHERE id = $1 FOR NO KEY UPDATE`, [s.taskId]);
  if (!task) return null;
  const waitEvents = task.wait_events === null ? null : String(task.wait_events);
  const refused = notAwaited(s, task.status as TaskStatus, waitEvents);
  if (refused) return refused;
  const [row] = await rows(
    c,
    client,
    `WITH ins AS (
         INSERT INTO ${c.t.signals} (task_id, name, payload, idempotency_key, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (task_id, idempotency_key) DO NOTHING RETURNING id
       ), woke AS (
         UPDATE ${c.t.tasks} SET run_at = CASE WHEN strpos(wait_events, '|' || $2 || '|') > 0 THEN $5 ELSE run_at END,
           wait_events = CASE WHEN $12::boolean THEN NULL ELSE wait_events END
         WHERE id = $1 AND EXISTS (SELECT 1 FROM ins) RETURNING id
       ), due AS (
         UPDATE ${c.t.heads} SET event_seq = event_seq + 1 WHERE id = (SELECT id FROM woke) RETURNING event_seq
       ), log AS (
         INSERT INTO ${c.t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
         SELECT $1, due.event_seq, $5, 'signal:received', $8::text, $9::text, '{"signalId":' || ins.id::text || $10::text FROM ins, due
       )
       SELECT count(*)::int AS n, CASE WHEN count(*) > 0 THEN ${notifySql('$6::text', '$7::text', '$11::text')} END AS notified FROM ins`,
    [
      s.taskId,
      s.name,
      s.payload,
      s.idempotencyKey,
      s.at,
      channelOf(c, s.notify),
      payload(s.notify),
      s.actorKind,
      s.actorId,
      receivedTail,
      listenerName(channelOf(c, s.notify)),
      s.onlyIfAwaited === true,
    ],
  );
  return { created: row?.n === 1 };
}
