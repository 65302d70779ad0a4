/**
 * @module sqlite/keyed-starts
 * Internal: not part of the public API.
 * Debounced and singleton starts on SQLite: the lookup of the task holding the key and the write
 * (the update of that task, or the insert of a new one) in one write transaction. SQLite has one
 * writer at a time, and a claim is a write transaction too, so a claim comes wholly before or
 * after; the partial unique indexes of migration 17 back the rule up.
 */
import { toTaskRow } from '../rows.ts';
import type { DebounceWrite, NewTask, SingletonAnswer, TaskRow } from '../store.ts';
import { LIVE_SINGLETON_SQL, UNCLAIMED_DEBOUNCE_SQL, debouncedRunAt } from '../store-sql/keyed-starts.ts';
import type { Raw, SqliteContext } from './context.ts';
import { insertOne } from './insert.ts';
import { byKey } from './read.ts';

export function startDebounced(c: SqliteContext, task: NewTask, write: DebounceWrite): { task: TaskRow; created: boolean } {
  return c.tx(() => {
    const held = c.stmt(`SELECT no, created_at FROM stepwise_tasks WHERE workflow = ? AND debounce_key = ? AND ${UNCLAIMED_DEBOUNCE_SQL}`).get(task.workflow, task.debounceKey) as
      Raw | undefined;
    if (!held) return insertOne(c, task);
    const no = Number(held.no);
    const runAt = debouncedRunAt(task.runAt, Number(held.created_at), write.maxWaitMs);
    const row = c
      .stmt(
        `UPDATE stepwise_tasks SET input = ?, run_at = ?, title = coalesce(?, title),
         concurrency_key = ?, concurrency_limit = ?, priority = ?, version = version + 1, updated_at = ? WHERE no = ? RETURNING *`,
      )
      .get(task.input, runAt, task.title ?? null, task.concurrencyKey ?? null, task.concurrencyLimit ?? null, task.priority ?? 0, task.createdAt, no) as Raw;
    c.append(no, task.createdAt, [write.log]);
    return { task: toTaskRow(row), created: false };
  });
}

export function startSingleton(c: SqliteContext, task: NewTask): SingletonAnswer {
  return c.tx(() => {
    const keyed = task.idempotencyKey === null ? null : byKey(c, task.idempotencyKey);
    if (keyed) return { task: keyed, created: false, held: 'idempotency' as const };
    const live = liveSingleton(c, task.workflow, task.singletonKey as string);
    if (live) return { task: live, created: false, held: 'singleton' as const };
    return insertOne(c, task);
  });
}

export function unclaimedDebounced(c: SqliteContext, workflow: string, key: string): TaskRow | null {
  const row = c.stmt(`SELECT * FROM stepwise_tasks WHERE workflow = ? AND debounce_key = ? AND ${UNCLAIMED_DEBOUNCE_SQL}`).get(workflow, key) as Raw | undefined;
  return row ? toTaskRow(row) : null;
}

export function liveSingleton(c: SqliteContext, workflow: string, key: string): TaskRow | null {
  const row = c.stmt(`SELECT * FROM stepwise_tasks WHERE workflow = ? AND singleton_key = ? AND ${LIVE_SINGLETON_SQL}`).get(workflow, key) as Raw | undefined;
  return row ? toTaskRow(row) : null;
}
