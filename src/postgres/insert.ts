/**
 * @module postgres/insert
 * Internal: not part of the public API.
 * Task creation on PostgreSQL: the task row and its `create` log entry in one statement, or the
 * existing task when the idempotency key is taken.
 */
import { TX_ATTEMPTS, poolOf, rows, run, type PgContext } from './connection.ts';
import { findTaskByKey } from './read.ts';
import { channelOf } from './listen.ts';
import { payload } from './wake.ts';
import { toTaskRow } from '../rows.ts';
import type { NewTask, TaskRow } from '../store.ts';

export async function insertTask(c: PgContext, task: NewTask): Promise<{ task: TaskRow; created: boolean }> {
  const created = task.log;
  return run(c, async () => {
    // One statement: the task and its 'create' log entry (seq 1), or nothing if the key exists. A
    // concurrent insert of the same key makes ON CONFLICT wait for it, so the re-select sees it;
    // the loop covers the case where the existing task was deleted in between.
    for (let attempt = 1; ; attempt++) {
      const [row] = await rows(
        c,
        poolOf(c),
        `WITH ins AS (
             INSERT INTO ${c.t.tasks} (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at, event_seq, deadline_at)
             VALUES ($1, $2, $3, $14, $4, $5, $6, $7, $7, 1, $15::bigint)
             ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING *
           ), h AS (
             INSERT INTO ${c.t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
             SELECT id, 1, created_at, $10, $11, $12, $13 FROM ins
           )
           SELECT ins.*, CASE WHEN $9::text IS NOT NULL THEN pg_notify($8, $9) END AS notified FROM ins`,
        [
          task.id, task.workflow, task.workflowVersion, task.input, task.idempotencyKey, task.runAt, task.createdAt, channelOf(c, task.notify), payload(task.notify),
          created.type, created.actorKind, created.actorId, created.data, task.status, task.deadlineAt ?? null,
        ],
      );
      if (row) return { task: toTaskRow(row), created: true };
      const existing = await findTaskByKey(c, task.idempotencyKey as string);
      if (existing) return { task: existing, created: false };
      if (attempt >= TX_ATTEMPTS) throw new Error(`insertTask: idempotency key "${task.idempotencyKey}" conflicts with a task that cannot be read`);
    }
  });
}
