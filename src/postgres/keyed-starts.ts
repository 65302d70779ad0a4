/**
 * @module postgres/keyed-starts
 * Internal: not part of the public API.
 * Debounced and singleton starts on PostgreSQL, atomic against concurrent starts of other
 * processes and against claims, with no lock of their own: the partial unique indexes of migration
 * 17 decide which of two racing inserts wins, and row locks order a start against a claim.
 *
 * Debounce: a conditional UPDATE of the unclaimed task of the workflow and key (its new input and
 * due time, with its `task:debounced` entry, in one statement). A claim that locked the row first
 * makes the UPDATE wait, then re-check its condition on the claimed row (READ COMMITTED), which no
 * longer matches; an UPDATE that locked it first keeps the claim's SKIP LOCKED away, and moves the
 * due time past now. Without a row updated, the task is inserted; an insert that meets another
 * start's unclaimed task (a unique violation on `tasks_debounce`, after waiting for that start to
 * commit) goes back to the UPDATE.
 *
 * Singleton: the insert (the usual statement, which answers a taken idempotency key with its task);
 * a unique violation on `tasks_singleton` means a live task holds the key: it is read and returned.
 * A task that ended between the two is no longer live: the insert is tried again.
 */
import { poolOf, rows, run, type PgContext } from './connection.ts';
import { insertTasks } from './insert.ts';
import { toTaskRow } from '../rows.ts';
import { StoreUnavailableError } from '../errors.ts';
import type { DebounceWrite, NewTask, SingletonAnswer, TaskRow, WakeEvent } from '../store.ts';
import { LIVE_SINGLETON_SQL, UNCLAIMED_DEBOUNCE_SQL } from '../store-sql/keyed-starts.ts';
import type { Tables } from './sql-text.ts';

/** How often a start goes round (a task claimed or ended between two statements) before it gives up. */
const ROUNDS = 10;

/** Whether `e` (or the driver error it wraps) is a unique violation of the index `index`. */
function violates(e: unknown, index: string): boolean {
  const cause = ((e as { cause?: unknown } | null)?.cause ?? e) as { code?: unknown; constraint?: unknown } | null;
  return cause?.code === '23505' && cause.constraint === index;
}

function lostRaces(what: string, key: string): StoreUnavailableError {
  return new StoreUnavailableError(`A ${what} start with key "${key}" lost ${ROUNDS} races in a row to other starts and claims of that key; try again.`);
}

export async function startDebounced(c: PgContext, task: NewTask, write: DebounceWrite, notify?: WakeEvent): Promise<{ task: TaskRow; created: boolean }> {
  for (let round = 1; round <= ROUNDS; round++) {
    const held = await updateHeld(c, task, write);
    if (held) return { task: held, created: false };
    try {
      return (await insertTasks(c, [task], notify))[0] as { task: TaskRow; created: boolean };
    } catch (e) {
      if (!violates(e, 'tasks_debounce')) throw e;
    }
  }
  throw lostRaces('debounced', task.debounceKey ?? '');
}

/**
 * The debounced start's UPDATE: the unclaimed task of workflow `$5` and key `$6` gets input `$1`
 * and due time `$3` (at most `$2` ms after its creation) and title `$11` if not null, its concurrency key, limit and priority `$12`-`$14` (computed
 * from the new input), with its log
 * entry (`$4` its time, `$7`-`$10` its type, actor and data). Found through the partial unique index `tasks_debounce`.
 */
export function debounceUpdateSql(t: Tables): string {
  return `WITH held AS (
      UPDATE ${t.tasks} SET input = $1::text,
        run_at = CASE WHEN $2::bigint IS NULL THEN $3::bigint ELSE LEAST($3::bigint, created_at + $2::bigint) END,
        title = coalesce($11::text, title), concurrency_key = $12::text, concurrency_limit = $13::integer, priority = $14::integer, version = version + 1, updated_at = $4::bigint
      WHERE workflow = $5::text AND debounce_key = $6::text AND ${UNCLAIMED_DEBOUNCE_SQL}
      RETURNING *
    ), hd AS (
      UPDATE ${t.heads} AS h SET event_seq = h.event_seq + 1 FROM held WHERE h.id = held.id RETURNING h.id, h.event_seq
    ), log AS (
      INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
      SELECT id, event_seq, $4::bigint, $7::text, $8::text, $9::text, $10::text FROM hd
    )
    SELECT * FROM held`;
}

/** The live task of workflow `$1` holding singleton key `$2`, through the partial unique index `tasks_singleton`. */
export function liveSingletonSql(t: Tables): string {
  return `SELECT * FROM ${t.tasks} WHERE workflow = $1::text AND singleton_key = $2::text AND ${LIVE_SINGLETON_SQL}`;
}

/** The unclaimed task of the workflow and key with the new input and due time, and its log entry; null if none. */
async function updateHeld(c: PgContext, task: NewTask, write: DebounceWrite): Promise<TaskRow | null> {
  const l = write.log;
  return run(c, async () => {
    const values = [
      task.input,
      write.maxWaitMs,
      task.runAt,
      task.createdAt,
      task.workflow,
      task.debounceKey,
      l.type,
      l.actorKind,
      l.actorId,
      l.data,
      task.title ?? null,
      task.concurrencyKey ?? null,
      task.concurrencyLimit ?? null,
      task.priority ?? 0,
    ];
    const [row] = await rows(c, poolOf(c), debounceUpdateSql(c.t), values);
    return row ? toTaskRow(row) : null;
  });
}

export async function startSingleton(c: PgContext, task: NewTask, notify?: WakeEvent): Promise<SingletonAnswer> {
  const key = task.singletonKey as string;
  for (let round = 1; round <= ROUNDS; round++) {
    try {
      const [r] = await insertTasks(c, [task], notify);
      const inserted = r as { task: TaskRow; created: boolean };
      return inserted.created ? inserted : { ...inserted, held: 'idempotency' };
    } catch (e) {
      if (!violates(e, 'tasks_singleton')) throw e;
    }
    const live = await liveSingleton(c, task.workflow, key);
    if (live) return { task: live, created: false, held: 'singleton' };
  }
  throw lostRaces('singleton', key);
}

export async function unclaimedDebounced(c: PgContext, workflow: string, key: string): Promise<TaskRow | null> {
  return run(c, async () => {
    const sql = `SELECT * FROM ${c.t.tasks} WHERE workflow = $1::text AND debounce_key = $2::text AND ${UNCLAIMED_DEBOUNCE_SQL}`;
    const [row] = await rows(c, poolOf(c), sql, [workflow, key]);
    return row ? toTaskRow(row) : null;
  });
}

export async function liveSingleton(c: PgContext, workflow: string, key: string): Promise<TaskRow | null> {
  return run(c, async () => {
    const [row] = await rows(c, poolOf(c), liveSingletonSql(c.t), [workflow, key]);
    return row ? toTaskRow(row) : null;
  });
}
