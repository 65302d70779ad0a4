/**
 * @module postgres/batch-sql
 * @internal
 * Group commit on PostgreSQL: many workers' writes in one statement each, so that a batch costs
 * one round trip and one commit whatever its size.
 *
 * - Step checkpoints: one multi-row `INSERT … SELECT FROM unnest(…)`, each row written only if
 *   its task, locked `FOR SHARE`, still has the writer's epoch and a leased status (the fence, per
 *   row).
 * - End-of-run transitions (epoch-guarded, without signals, deletions or an event wait): one
 *   multi-row `UPDATE … FROM unnest(…)` over the task rows, locked `FOR UPDATE`, whose status,
 *   epoch and pause request match, plus their history rows and the journal rows they carry (for
 *   the tasks whose update happened).
 *
 * Each task row is found by its primary key, one lookup per op ({@link lockById}), so a batch costs
 * the same on a table of a thousand tasks or of millions. Multi-row lockers take their row locks in
 * id order (the ops sorted by id, in the C collation of the key), as the heartbeat does, so two of
 * them never deadlock.
 */
import { STEP_COLUMNS, stepValues } from '../rows.ts';
import type { StepRow, StepWrite, TransitionWrite, WakeEvent } from '../store.ts';
import { Params, STEP_TYPES, STEP_UPSERT_SET, leaseFence, lockById, type Tables } from './sql-text.ts';

/**
 * The fenced checkpoints of `ops` (none with `consume`). Returns the statement and, per op, the
 * key `task_id/seq` to look for among the returned rows (an op whose row comes back was accepted).
 */
export function stepBatchSql(t: Tables, ops: readonly StepWrite[]): { text: string; values: unknown[]; keys: string[] } {
  // The last write of a (task, seq) wins, as a sequence of upserts would; an INSERT … ON CONFLICT
  // may not touch one row twice.
  const last = new Map<string, StepWrite>();
  for (const op of ops) last.set(`${op.step.taskId}/${op.step.seq}`, op);
  const rows = [...last.values()];
  const p = new Params();
  const columns = stepColumns(p, rows.map((op) => op.step));
  const fence = p.add(rows.map((op) => op.epoch), 'integer[]');
  const writer = p.add(rows.map((op) => op.taskId), 'text[]');
  const text = `WITH i AS (
      SELECT * FROM unnest(${columns.join(', ')}, ${fence}, ${writer})
        AS i(${STEP_COLUMNS.join(', ')}, fence_epoch, writer_task)
    ), ins AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')})
      SELECT ${STEP_COLUMNS.map((c) => `i.${c}`).join(', ')} FROM (SELECT * FROM i ORDER BY writer_task COLLATE "C") i
      WHERE i.task_id = i.writer_task AND ${leaseFence(t, 'i.writer_task', 'i.fence_epoch')}
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_SET}
      RETURNING task_id, seq
    )
    SELECT task_id, seq FROM ins`;
  return { text, values: p.values, keys: ops.map((op) => `${op.step.taskId}/${op.step.seq}`) };
}

/** One array parameter per journal column (each row's values taken once). */
function stepColumns(p: Params, rows: readonly StepRow[]): string[] {
  const arrays: unknown[][] = STEP_COLUMNS.map(() => new Array<unknown>(rows.length));
  rows.forEach((row, r) => stepValues(row).forEach((v, c) => ((arrays[c] as unknown[])[r] = v)));
  return arrays.map((values, c) => p.add(values, `${STEP_TYPES[c]}[]`));
}

/** Whether a transition can go into {@link transitionBatchSql}. */
export function isBatchableTransition(w: TransitionWrite): boolean {
  return (
    'epoch' in w.guard &&
    w.from.length === 1 &&
    !w.deleteSteps?.length &&
    !w.consume?.length &&
    !w.set.waitEvents?.length
  );
}

/** Epoch-guarded transitions of distinct tasks in one statement; returns the updated rows (with `ord`). */
export function transitionBatchSql(
  t: Tables,
  ops: readonly TransitionWrite[],
  channelOf: (event: WakeEvent) => string,
): { text: string; values: unknown[] } {
  const p = new Params();
  const col = <T>(f: (w: TransitionWrite) => T, type: string): string => p.add(ops.map(f), `${type}[]`);
  const has = (k: keyof TransitionWrite['set']) => (w: TransitionWrite): boolean => k in w.set && w.set[k] !== undefined;
  const i = {
    id: col((w) => w.taskId, 'text'),
    epoch: col((w) => ('epoch' in w.guard ? w.guard.epoch : null), 'integer'),
    fromStatus: col((w) => w.from[0], 'text'),
    toStatus: col((w) => w.to, 'text'),
    event: col((w) => w.event, 'text'),
    at: col((w) => w.at, 'bigint'),
    worker: col((w) => w.workerId ?? null, 'text'),
    detail: col((w) => w.detail ?? null, 'text'),
    pauseGuard: col((w) => w.pauseRequested ?? null, 'boolean'),
    setOutput: col(has('output'), 'boolean'),
    output: col((w) => w.set.output ?? null, 'text'),
    setError: col(has('error'), 'boolean'),
    error: col((w) => w.set.error ?? null, 'text'),
    setRunAt: col(has('runAt'), 'boolean'),
    runAt: col((w) => w.set.runAt ?? null, 'bigint'),
    clearLease: col((w) => w.set.clearLease === true, 'boolean'),
    setPause: col(has('pauseRequested'), 'boolean'),
    pause: col((w) => w.set.pauseRequested ?? false, 'boolean'),
    setWait: col(has('wait'), 'boolean'),
    wait: col((w) => w.set.wait ?? null, 'text'),
    setWaitEvents: col(has('waitEvents'), 'boolean'),
    setCancel: col(has('cancelReason'), 'boolean'),
    cancel: col((w) => w.set.cancelReason ?? null, 'text'),
    setFinished: col(has('finishedAt'), 'boolean'),
    finished: col((w) => w.set.finishedAt ?? null, 'bigint'),
    retries: col((w) => w.set.incrementRetries === true, 'boolean'),
    notify: col((w) => (w.notify ? JSON.stringify(w.notify) : null), 'text'),
    notifyChannel: col((w) => (w.notify ? channelOf(w.notify) : null), 'text'),
  };
  // `ord` (1-based) is the op's position in `ops`, from unnest's ORDINALITY.
  const names = Object.keys(i);
  const keep = (c: string, flag: string, value: string): string => `${c} = CASE WHEN c.${flag} THEN c.${value} ELSE t.${c} END`;
  const text = `WITH i AS (
      SELECT * FROM unnest(${names.map((k) => i[k as keyof typeof i]).join(', ')}) WITH ORDINALITY AS i(${names.join(', ')}, ord)
    ), cur AS (
      SELECT i.*, t.status AS cur_status, t.epoch AS cur_epoch
      FROM (SELECT * FROM i ORDER BY id COLLATE "C") i CROSS JOIN LATERAL (${lockById(t, 'i.id', 'UPDATE')}) t
      WHERE t.epoch = i.epoch AND t.status = i.fromStatus AND (i.pauseGuard IS NULL OR t.pause_requested = i.pauseGuard)
    ), upd AS (
      UPDATE ${t.tasks} AS t SET status = c.toStatus, version = t.version + 1, updated_at = c.at,
        ${keep('output', 'setOutput', 'output')}, ${keep('error', 'setError', 'error')}, ${keep('run_at', 'setRunAt', 'runAt')},
        lease_owner = CASE WHEN c.clearLease THEN NULL ELSE t.lease_owner END,
        lease_expires_at = CASE WHEN c.clearLease THEN NULL ELSE t.lease_expires_at END,
        ${keep('pause_requested', 'setPause', 'pause')}, ${keep('wait', 'setWait', 'wait')},
        wait_events = CASE WHEN c.setWaitEvents THEN NULL ELSE t.wait_events END,
        ${keep('cancel_reason', 'setCancel', 'cancel')}, ${keep('finished_at', 'setFinished', 'finished')},
        retries = t.retries + CASE WHEN c.retries THEN 1 ELSE 0 END
      FROM cur c WHERE t.id = c.id
      RETURNING t.*, c.ord AS batch_ord, c.notify AS batch_notify, c.notifyChannel AS batch_channel,
        c.at AS h_at, c.event AS h_event, c.cur_status AS h_from, c.cur_epoch AS h_epoch, c.worker AS h_worker, c.detail AS h_detail
    ), hist AS (
      INSERT INTO ${t.history} (task_id, at, event, from_status, to_status, epoch, worker_id, detail)
      SELECT id, h_at, h_event, h_from, status, h_epoch, h_worker, h_detail FROM upd ORDER BY batch_ord
    )${journalCte(t, p, ops)}
    SELECT upd.*, CASE WHEN batch_notify IS NOT NULL THEN pg_notify(batch_channel, batch_notify) END AS notified FROM upd`;
  return { text, values: p.values };
}

/** The journal rows carried by batched transitions, written only for tasks whose update happened. */
function journalCte(t: Tables, p: Params, ops: readonly TransitionWrite[]): string {
  const last = new Map<string, StepRow>();
  for (const op of ops) for (const step of op.steps ?? []) last.set(`${step.taskId}/${step.seq}`, step);
  const rows = [...last.values()];
  if (!rows.length) return '';
  const columns = stepColumns(p, rows);
  return `, journal AS (
      INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')})
      SELECT ${STEP_COLUMNS.map((c) => `j.${c}`).join(', ')}
      FROM unnest(${columns.join(', ')}) AS j(${STEP_COLUMNS.join(', ')}) JOIN upd ON upd.id = j.task_id
      ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_SET}
    )`;
}
