/**
 * @module postgres/heads
 * Internal: not part of the public API.
 * Statements on `task_heads` (see sql/postgres/000026_task_heads.sql): the narrow row per task that
 * holds its fence (status, epoch, lease owner: copies of the task row's) and its log counter
 * `event_seq`. A checkpoint fences and numbers its entries on this row alone; every write of a
 * task's status, epoch or owner writes the copy in the same statement ({@link writeHeadsSql}).
 *
 * Lock order, which keeps heads out of every cycle of waits: a statement locks a task's row before
 * its head; several heads are locked in id order; a checkpoint locks heads only, and on its own
 * (autocommit) waits for no other lock once it holds one; a transaction that writes transitions
 * one by one, of several tasks or with checkpoints, or a child's end with its parent's signal,
 * locks their task rows first, then their heads, each in id order ({@link lockHeadsSql};
 * write-batch.ts, transition.ts).
 */
import { LEASED_STATUSES } from '../lifecycle.ts';
import { statusLiterals } from '../store-sql/filters.ts';

const LEASED_SQL = statusLiterals(LEASED_STATUSES);

/** The quoted names of the tables these statements use (a part of sql-text.ts's `Tables`). */
interface Tables {
  tasks: string;
  heads: string;
}

/**
 * The fence of a checkpoint that appends `n` log entries: an UPDATE of the head of task `id`, only
 * while it is leased at `epoch`, that adds `n` to its log counter and returns the new value (the
 * entries take seq new - n + 1 … new) and the lease holder (their actor). The row lock it takes
 * until commit holds off a concurrent claim (whose epoch copy would otherwise commit between the
 * check and the write) and serialises every appender of the task: one that waited re-checks the
 * fence and re-reads the counter on the newest row version (EvalPlanQual), so no two writers take
 * the same seq and none leaves a gap. With `unless` (a CTE's name), nothing is appended when that
 * CTE has a row.
 */
export function appendFence(t: Tables, id: string, epoch: string, n: string, unless?: string): string {
  return `UPDATE ${t.heads} SET event_seq = event_seq + ${n}
      WHERE id = ${id} AND epoch = ${epoch} AND status IN (${LEASED_SQL})${unless ? ` AND NOT EXISTS (SELECT 1 FROM ${unless})` : ''}
      RETURNING event_seq, lease_owner`;
}

/**
 * The CTEs `<name>_lk` and `<name>`: the heads of the rows of `rows` (a FROM item with columns `id`,
 * `status`, `epoch`, `lease_owner` and `n`, and any others) locked in id order, then each updated:
 * its log counter raised by `n`, and, for a row whose `status` is not NULL (a task row this
 * statement wrote), the status, epoch and lease owner copied from it. `<name>` returns the new
 * `event_seq` and every column of the row of `rows` (so `id`, `n` and the others): the row's
 * entries take seq event_seq - n + 1 … event_seq. Every row of `rows` must be a task whose row this
 * statement locked (see the lock order above); a task appears at most once.
 *
 * A statement that writes log entries or journal rows reads what it needs of the task from
 * `<name>`'s columns rather than joining `<name>` to another CTE of the same statement: the
 * planner estimates one row for each such CTE and joins them by a nested loop, whose cost grows
 * with the square of the batch (65,000 comparisons for a batch of 256 tasks).
 */
export function writeHeadsSql(t: Tables, name: string, rows: string): string {
  return `${name}_lk AS MATERIALIZED (
      SELECT x.* FROM (SELECT * FROM ${rows} ORDER BY id COLLATE "C") x
      CROSS JOIN LATERAL (SELECT 1 FROM ${t.heads} WHERE id = x.id OFFSET 0 FOR NO KEY UPDATE) k
    ), ${name} AS (
      UPDATE ${t.heads} AS h SET event_seq = h.event_seq + x.n, status = coalesce(x.status, h.status), epoch = coalesce(x.epoch, h.epoch),
        lease_owner = CASE WHEN x.status IS NULL THEN h.lease_owner ELSE x.lease_owner END
      FROM ${name}_lk x WHERE h.id = x.id
      RETURNING h.event_seq, x.*
    )`;
}

/**
 * `(SELECT id, status, epoch, lease_owner, <n> AS n[, <carried>] FROM <from>) r`: the rows for
 * {@link writeHeadsSql} of the task rows a statement wrote (`from`, a CTE returning those columns),
 * each appending `n` entries (SQL, evaluated on the row), with the columns of `from` listed in
 * `carried` passed through to the heads' CTE for the statement's log entries.
 */
export function copiedRows(from: string, n: string, carried = ''): string {
  return `(SELECT id, status, epoch, lease_owner, ${n} AS n${carried ? `, ${carried}` : ''} FROM ${from}) r`;
}

/**
 * A SELECT that locks the heads of the tasks `ids` (an array parameter of task ids; repeats taken
 * once) in id order: in a transaction that has locked those tasks' rows (`lockInIdOrder`), before
 * any of its writes locks a head. Its writes may reach a child's head before its parent's (a
 * child's end, then its signal to the parent), and a parent's id sorts before its children's; a
 * checkpoint batch holding the parent's head and reaching for the child's would close a cycle.
 */
export function lockHeadsSql(t: Tables, ids: string): string {
  return `SELECT 1 FROM ${idOrderSql(`unnest(${ids}) AS u(id)`)}
      CROSS JOIN LATERAL (SELECT 1 FROM ${t.heads} WHERE id = o.id OFFSET 0 FOR NO KEY UPDATE) h`;
}

/**
 * `(…) o`: the distinct ids of `ids` (a FROM item named `u` with a column `id`) in id order (`C`
 * collation), the order every multi-row locker takes its locks in.
 */
export function idOrderSql(ids: string): string {
  return `(SELECT DISTINCT u.id COLLATE "C" AS id FROM ${ids} ORDER BY 1) o`;
}

/**
 * An UPDATE that raises the log counter of task `id` by `n` and returns the new `event_seq`, after
 * locking the task's row (`FOR NO KEY UPDATE`): an append of entries that writes nothing else of the
 * task, in the lock order above.
 */
export function bumpHeadSql(t: Tables, id: string, n: string): string {
  return `UPDATE ${t.heads} SET event_seq = event_seq + ${n}
      WHERE id = (SELECT id FROM ${t.tasks} WHERE id = ${id} FOR NO KEY UPDATE)
      RETURNING event_seq`;
}
