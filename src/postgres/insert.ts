/**
 * @module postgres/insert
 * Internal: not part of the public API.
 * Task creation on PostgreSQL: the task rows and their `create` log entries in one statement
 * (one task, or a whole batch of starts), or the existing tasks whose idempotency keys are taken.
 */
import { TX_ATTEMPTS, poolOf, rows, run, type PgContext } from './connection.ts';
import { findTaskByKey } from './read.ts';
import { channelOf, listenerName, notifySql } from './listen.ts';
import { payload } from './wake.ts';
import { toTaskRow } from '../rows.ts';
import { arrayLiteral } from './sql-text.ts';
import { heldAtStartSql } from './key-queues.ts';
import type { NewTask, TaskRow, WakeEvent } from '../store.ts';

type Inserted = { task: TaskRow; created: boolean };

export async function insertTask(c: PgContext, task: NewTask): Promise<Inserted> {
  return (await insertTasks(c, [task], task.notify))[0] as Inserted;
}

/**
 * One statement: the tasks and their `create` entries (seq 1), the tasks whose key exists left
 * out (ON CONFLICT DO NOTHING), and one NOTIFY if any was created and someone listens. A
 * concurrent insert of the same key makes ON CONFLICT wait for it, so the re-select that follows
 * sees it; the loop covers a task deleted in between. Rows go in in key order, so that two batches
 * sharing keys wait for each other in the same order and never deadlock.
 */
export async function insertTasks(c: PgContext, tasks: readonly NewTask[], notify?: WakeEvent): Promise<Inserted[]> {
  const results = new Array<Inserted | undefined>(tasks.length);
  // A key used twice in the batch: the first use inserts, the later ones get the first's task.
  const firstOfKey = new Map<string, number>();
  const repeats: Array<{ at: number; first: number }> = [];
  let todo: number[] = [];
  tasks.forEach((t, at) => {
    const first = t.idempotencyKey === null ? undefined : firstOfKey.get(t.idempotencyKey);
    if (first !== undefined) return void repeats.push({ at, first });
    if (t.idempotencyKey !== null) firstOfKey.set(t.idempotencyKey, at);
    todo.push(at);
  });
  const keyOf = (at: number): string => (tasks[at] as NewTask).idempotencyKey ?? '';
  todo.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : a - b));
  await run(c, async () => {
    for (let attempt = 1; todo.length; attempt++) {
      const batch = todo.map((at) => tasks[at] as NewTask);
      const created = new Map<string, TaskRow>();
      const tagged = batch.some((t) => t.tags && Object.keys(t.tags).length);
      const keyed = batch.some((t) => t.concurrencyKey != null);
      for (const row of await rows(c, poolOf(c), insertSql(c, tagged, keyed), insertValues(c, batch, notify))) {
        const task = toTaskRow(row);
        created.set(task.id, task);
      }
      const taken: number[] = [];
      for (const at of todo) {
        const row = created.get((tasks[at] as NewTask).id);
        if (row) results[at] = { task: row, created: true };
        else taken.push(at);
      }
      // Only tasks with a key can be left out; each is the task that holds its key.
      for (const at of taken) {
        const key = (tasks[at] as NewTask).idempotencyKey;
        if (key === null) throw new Error(`insertTasks: task ${(tasks[at] as NewTask).id} was not inserted`);
        const existing = await findTaskByKey(c, key);
        if (existing) results[at] = { task: existing, created: false };
      }
      todo = taken.filter((at) => !results[at]);
      if (todo.length && attempt >= TX_ATTEMPTS) throw new Error(`insertTasks: idempotency key "${keyOf(todo[0] as number)}" conflicts with a task that cannot be read`);
      // The retry announces again only if this attempt created nothing (then nothing was sent).
      if (created.size) notify = undefined;
    }
  });
  for (const { at, first } of repeats) results[at] = { task: (results[first] as Inserted).task, created: false };
  return results as Inserted[];
}

/**
 * The statement's text per store, without and with the tag index's rows, without and with the
 * hold of keyed tasks (it never changes, so it is prepared once per connection; tasks without tags
 * or keys do not pay for those parts).
 */
const texts = new WeakMap<PgContext, string[]>();

export function insertSql(c: PgContext, tagged: boolean, keyed = false): string {
  let text = texts.get(c);
  if (text === undefined) texts.set(c, (text = [insertText(c, false, false), insertText(c, true, false), insertText(c, false, true), insertText(c, true, true)]));
  return text[(tagged ? 1 : 0) + (keyed ? 2 : 0)] as string;
}

function insertText(c: PgContext, tagged: boolean, keyed: boolean): string {
  return `WITH i0 AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[],
        $9::text[], $10::text[], $11::text[], $12::text[], $16::text[], $17::bigint[],
        $18::text[], $19::text[], $20::text[], $21::text[], $22::integer[], $23::integer[], $24::text[], $25::text[], $26::integer[], $27::text[], $28::text[]) WITH ORDINALITY
        AS i(id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, ev_type, ev_kind, ev_actor, ev_data, usage, deadline_at,
          title, debounce_key, singleton_key, concurrency_key, concurrency_limit, priority, parent_id, root_id, depth, tags, forked_from, ord)
    ), i AS (
      SELECT i0.*, ${keyed ? heldAtStartSql(c.t, 'i0') : 'false'} AS held_by_key FROM i0
    ), ins AS (
      INSERT INTO ${c.t.tasks} (id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, updated_at, usage, deadline_at,
        title, debounce_key, singleton_key, concurrency_key, concurrency_limit, priority, parent_id, root_id, depth, tags, forked_from, held_by_key)
      SELECT id, workflow, workflow_version, status, input, idempotency_key, run_at, created_at, created_at, usage, deadline_at,
        title, debounce_key, singleton_key, concurrency_key, concurrency_limit, priority, parent_id, root_id, depth, tags, forked_from, held_by_key FROM i ORDER BY ord
      ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING *
    ), hd AS (
      INSERT INTO ${c.t.heads} (id, status, epoch, lease_owner, event_seq) SELECT id, status, epoch, lease_owner, 1 FROM ins
    ), h AS (
      INSERT INTO ${c.t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT i.id, 1, i.created_at, i.ev_type, i.ev_kind, i.ev_actor, i.ev_data FROM i JOIN ins ON ins.id = i.id
    ),${
      tagged
        ? ` g AS (
      INSERT INTO ${c.t.tags} (key, value, task_id) SELECT kv.key, kv.value, ins.id FROM ins, json_each_text(ins.tags::json) kv
    ),`
        : ''
    } n AS (
      SELECT ${notifySql('$13::text', '$14::text', '$15::text')} AS sent WHERE EXISTS (SELECT 1 FROM ins)
    )
    SELECT ins.*, (SELECT count(*) FROM n) AS notified FROM ins`;
}

export function insertValues(c: PgContext, batch: readonly NewTask[], notify: WakeEvent | undefined): unknown[] {
  // Each column as its array literal, built here in one pass: the driver's own serialisation of a
  // JS array runs two regular-expression replacements on every element.
  const col = <T>(f: (t: NewTask) => T): unknown => arrayLiteral(batch.map(f));
  const channel = channelOf(c, notify);
  return [
    col((t) => t.id),
    col((t) => t.workflow),
    col((t) => t.workflowVersion),
    col((t) => t.status),
    col((t) => t.input),
    col((t) => t.idempotencyKey),
    col((t) => t.runAt),
    col((t) => t.createdAt),
    col((t) => t.log.type),
    col((t) => t.log.actorKind),
    col((t) => t.log.actorId),
    col((t) => t.log.data),
    channel,
    payload(notify),
    listenerName(channel),
    col((t) => t.usage ?? null),
    col((t) => t.deadlineAt ?? null),
    col((t) => t.title ?? null),
    col((t) => t.debounceKey ?? null),
    col((t) => t.singletonKey ?? null),
    col((t) => t.concurrencyKey ?? null),
    col((t) => t.concurrencyLimit ?? null),
    col((t) => t.priority ?? 0),
    col((t) => t.parentId ?? null),
    col((t) => t.rootId ?? null),
    col((t) => t.depth ?? 0),
    col((t) => (t.tags && Object.keys(t.tags).length ? JSON.stringify(t.tags) : null)),
    col((t) => t.forkedFrom ?? null),
  ];
}
