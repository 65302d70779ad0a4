/**
 * @module postgres/claim
 * Internal: not part of the public API.
 * Claims on PostgreSQL. Without concurrency caps, one autocommit statement locks candidates with
 * `FOR UPDATE SKIP LOCKED` and takes them; with caps, a transaction serializes the claimers of
 * each capped workflow on an advisory lock, counts its live leases, and picks candidates window by
 * window within the room left (the dialect-free part of that is in claim-plan.ts).
 *
 * Leases are judged and granted by the database's clock (see {@link DB_NOW_MS}): a worker whose
 * clock runs ahead does not see live leases as expired. Due times (`run_at`) are the caller's.
 */
import type { ClientBase } from 'pg';
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';
import { DB_NOW_MS, Params, leasedCountSql, reclaimTargetSql, servedSql, sqlStatuses, type Tables } from './sql-text.ts';
import { copiedRows, writeHeadsSql } from './heads.ts';
import { DUE_ORDER, keyRoomSql, takeSlotsSql } from './key-slots.ts';
import { NOT_HELD } from './key-queues.ts';
import { capsOf, isCapped, nextWindow, subtractLeased, takeWindow, type PickedTask } from '../claim-plan.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { toSignalRow, toStepRow, toTaskRow } from '../rows.ts';
import type { ClaimRequest, ClaimedTask } from '../store.ts';
import { journalHeld } from '../store/leases.ts';

export async function claim(c: PgContext, r: ClaimRequest): Promise<ClaimedTask[]> {
  if (r.limit <= 0 || r.workflows.length === 0) return [];
  if (!isCapped(r)) return run(c, () => claimUncapped(c, r));
  return run(c, () => tx(c, (client) => claimCapped(c, client, r)));
}

/** A claim under concurrency caps, in the transaction of `client`. */
async function claimCapped(c: PgContext, client: ClientBase, r: ClaimRequest): Promise<ClaimedTask[]> {
  const room = await roomOf(c, client, r);
  const picked: PickedTask[] = [];
  // Locks due candidates (skipping rows other workers hold) until `limit` are picked. A row of
  // a workflow without room is skipped (it stays locked until commit); the workflow is then
  // left out of the next round, so the loop ends after at most one round per capped workflow.
  const pick = async (event: 'claim' | 'reclaim', from: readonly TaskStatus[], due: string, order: string): Promise<void> => {
    if (!from.length) return;
    for (;;) {
      const window = nextWindow(r, picked, room);
      if (!window) return;
      const q = new Params();
      const text = `SELECT id, status, workflow, lease_owner FROM ${c.t.tasks} t
               WHERE status IN (${sqlStatuses(from)}) AND ${due} <= ${due === 'lease_expires_at' ? DB_NOW_MS : q.add(r.now, 'bigint')} AND ${servedSql(q, window.allowed, r.versions)}
               ${event === 'claim' ? `AND ${NOT_HELD} AND ${keyRoomSql(c.t, 't', q.add(r.now, 'bigint'))}` : ''}
               AND NOT (id = ANY(${q.add(
                 picked.map((x) => x.id),
                 'text[]',
               )}))
               ORDER BY ${order} LIMIT ${q.add(window.need, 'integer')} FOR UPDATE SKIP LOCKED`;
      if (!takeWindow(await rows(c, client, text, q.values), window.need, event, room, picked)) return;
    }
  };
  // Expired leases first: their tasks have waited longest.
  await pick('reclaim', r.reclaim.from, 'lease_expires_at', 'lease_expires_at, id');
  await pick('claim', r.claim.from, 'run_at', `${DUE_ORDER}, id`);
  if (!picked.length) return [];

  const { text, values } = cappedTakeSql(c.t, r, picked);
  const taken = await rows(c, client, text, values);
  return withJournals(c, client, r, taken);
}

/** The statement of a capped claim that takes the `picked` candidates (locked by its transaction) and appends their claim entries. */
export function cappedTakeSql(t: Tables, r: ClaimRequest, picked: readonly PickedTask[]): { text: string; values: unknown[] } {
  const p = new Params();
  const ids = picked.map((x) => x.id);
  const text = `WITH p AS (
             SELECT * FROM unnest(${p.add(ids, 'text[]')}, ${p.add(
               picked.map((x) => x.event),
               'text[]',
             )},
               ${p.add(
                 picked.map((x) => x.status),
                 'text[]',
               )},
               ${p.add(
                 picked.map((x) => (x.event === 'reclaim' ? JSON.stringify({ previousOwner: x.leaseOwner }) : null)),
                 'text[]',
               )})
               WITH ORDINALITY AS p(p_id, p_event, p_status, p_detail, p_ord)
           ), kc AS (
             SELECT t.id, t.concurrency_key AS ckey, t.concurrency_limit AS clim, ${DUE_ORDER} AS due
             FROM ${t.tasks} t JOIN p ON t.id = p.p_id WHERE p.p_event = 'claim'
           ), ${takeSlotsSql(t, 'kc')}, u AS (
             UPDATE ${t.tasks} AS t
             SET status = CASE WHEN p.p_event = 'reclaim' THEN ${reclaimTargetSql(p, r.reclaim.to, 'p.p_status')} ELSE ${p.add(r.claim.to, 'text')} END,
               lease_owner = ${p.add(r.workerId, 'text')}, lease_expires_at = ${DB_NOW_MS} + ${p.add(r.leaseMs, 'bigint')},
               epoch = t.epoch + 1, version = t.version + 1, runs = t.runs + 1, wait = NULL, wait_events = NULL,
               updated_at = ${p.add(r.now, 'bigint')}
             FROM p WHERE t.id = p.p_id AND (p.p_event = 'reclaim' OR t.concurrency_key IS NULL OR p.p_id IN (SELECT task_id FROM ins))
             RETURNING t.*, p.p_event, p.p_status, p.p_detail, p.p_ord
           ), ${writeHeadsSql(t, 'hd', copiedRows('u', '1', 'updated_at, p_event, p_status, p_detail, p_ord'))}, h AS (
             INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
             SELECT id, event_seq, updated_at, 'transition', 'worker', lease_owner,
               json_build_object('event', p_event, 'from', p_status, 'to', status, 'epoch', epoch, 'detail', p_detail::json)::text
             FROM hd ORDER BY p_ord
           )
           SELECT * FROM u ORDER BY p_ord`;
  return { text, values: p.values };
}

/** The claimed rows with their journals (but those the worker holds) and unconsumed signals. */
async function withJournals(c: PgContext, client: ClientBase, r: ClaimRequest, taken: Record<string, unknown>[]): Promise<ClaimedTask[]> {
  const ids = taken.map((row) => String(row.id));
  const held = new Set(taken.filter((row) => journalHeld(r, { id: String(row.id), epoch: Number(row.epoch) }, row.p_event as 'claim' | 'reclaim')).map((row) => String(row.id)));
  const read = ids.filter((id) => !held.has(id));
  const steps = groupBy(
    read.length ? (await rows(c, client, `SELECT * FROM ${c.t.steps} WHERE task_id = ANY($1::text[]) ORDER BY task_id, seq`, [read])).map(toStepRow) : [],
    (s) => s.taskId,
  );
  const signals = groupBy(
    (await rows(c, client, `SELECT * FROM ${c.t.signals} WHERE task_id = ANY($1::text[]) AND consumed_seq IS NULL ORDER BY id`, [ids])).map(toSignalRow),
    (s) => s.taskId,
  );
  return taken.map((row) => {
    const task = toTaskRow(row);
    const claimed: ClaimedTask = { task, event: row.p_event as 'claim' | 'reclaim', steps: steps.get(task.id) ?? [], signals: signals.get(task.id) ?? [] };
    if (held.has(task.id)) claimed.journalOmitted = true;
    return claimed;
  });
}

/**
 * The claim without concurrency caps: one autocommit statement that locks candidates with
 * `FOR UPDATE SKIP LOCKED` (expired leases first, then due tasks), takes them and appends their
 * claim entries; null when the request claims from no status.
 */
export function claimUncappedSql(t: Tables, r: ClaimRequest): { text: string; values: unknown[] } | null {
  const p = new Params();
  const now = p.add(r.now, 'bigint');
  const served = servedSql(p, r.workflows, r.versions);
  const limit = p.add(r.limit, 'integer');
  const reclaimTo = reclaimTargetSql(p, r.reclaim.to, 'p.status');
  const claimTo = p.add(r.claim.to, 'text');
  const parts: string[] = [];
  if (r.reclaim.from.length) {
    parts.push(`r AS (
        SELECT id, status, lease_owner, 0 AS pri, lease_expires_at AS due, NULL::text AS ckey, NULL::integer AS clim FROM ${t.tasks}
        WHERE status IN (${sqlStatuses(r.reclaim.from)}) AND lease_expires_at <= ${DB_NOW_MS} AND ${served}
        ORDER BY lease_expires_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)`);
  }
  if (r.claim.from.length) {
    parts.push(`c AS (
        SELECT id, status, NULL::text AS lease_owner, 1 AS pri, ${DUE_ORDER} AS due, concurrency_key AS ckey, concurrency_limit AS clim FROM ${t.tasks} t
        WHERE status IN (${sqlStatuses(r.claim.from)}) AND ${DUE_ORDER} <= ${now} AND run_at <= ${now} AND ${served} AND ${NOT_HELD} AND ${keyRoomSql(t, 't', now)}
        ORDER BY ${DUE_ORDER}, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)`);
  }
  if (!parts.length) return null;
  const union = [r.reclaim.from.length ? 'SELECT * FROM r' : '', r.claim.from.length ? 'SELECT * FROM c' : ''].filter(Boolean).join(' UNION ALL ');
  const text = `WITH ${parts.join(', ')},
       p0 AS (SELECT * FROM (${union}) x ORDER BY pri, due, id LIMIT ${limit}),
       ${takeSlotsSql(t, 'p0')},
       p AS (SELECT * FROM p0 WHERE ckey IS NULL OR id IN (SELECT task_id FROM ins)),
       u AS (
         UPDATE ${t.tasks} AS t
         SET status = CASE WHEN p.pri = 0 THEN ${reclaimTo} ELSE ${claimTo} END,
           lease_owner = ${p.add(r.workerId, 'text')}, lease_expires_at = ${DB_NOW_MS} + ${p.add(r.leaseMs, 'bigint')},
           epoch = t.epoch + 1, version = t.version + 1, runs = t.runs + 1, wait = NULL, wait_events = NULL, updated_at = ${now}
         FROM p WHERE t.id = p.id
         RETURNING t.*, p.pri AS p_pri, p.status AS p_status, p.lease_owner AS p_owner
       ), ${writeHeadsSql(t, 'hd', copiedRows('u', '1', 'p_pri, p_status, p_owner'))}, h AS (
         INSERT INTO ${t.events} (task_id, seq, at, type, actor_kind, actor_id, data)
         SELECT id, event_seq, ${now}, 'transition', 'worker', lease_owner,
           json_build_object('event', CASE WHEN p_pri = 0 THEN 'reclaim' ELSE 'claim' END, 'from', p_status, 'to', status, 'epoch', epoch,
             'detail', CASE WHEN p_pri = 0 THEN json_build_object('previousOwner', p_owner) END)::text
         FROM hd ORDER BY p_pri, id
       )
       SELECT u.*,
         EXISTS (SELECT 1 FROM ${t.signals} g WHERE g.task_id = u.id AND g.consumed_seq IS NULL) AS has_signals
       FROM u ORDER BY p_pri, id`;
  return { text, values: p.values };
}

/**
 * Claims without concurrency caps ({@link claimUncappedSql}); the journals of resumed tasks are
 * read afterwards (a journal cannot change once the claim has committed: older runs are fenced off).
 */
async function claimUncapped(c: PgContext, r: ClaimRequest): Promise<ClaimedTask[]> {
  const statement = claimUncappedSql(c.t, r);
  if (!statement) return [];
  const taken = await rows(c, poolOf(c), statement.text, statement.values);
  // The journal is read after the claim committed, with a fresh snapshot: a step write that
  // committed while this statement waited is included (later ones are fenced off). A first run
  // has no journal, but a fork's (the rows it copied). Signals sent meanwhile are picked up when the
  // run waits for them.
  const withSteps: string[] = [];
  const withSignals: string[] = [];
  for (const row of taken) {
    if ((Number(row.runs) > 1 || row.forked_from !== null) && !heldRow(r, row)) withSteps.push(String(row.id));
    if (row.has_signals === true) withSignals.push(String(row.id));
  }
  const [steps, signals] = await Promise.all([
    withSteps.length ? rows(c, poolOf(c), `SELECT * FROM ${c.t.steps} WHERE task_id = ANY($1::text[]) ORDER BY task_id, seq`, [withSteps]) : Promise.resolve([]),
    withSignals.length ? rows(c, poolOf(c), `SELECT * FROM ${c.t.signals} WHERE task_id = ANY($1::text[]) AND consumed_seq IS NULL ORDER BY id`, [withSignals]) : Promise.resolve([]),
  ]);
  const stepsBy = groupBy(steps.map(toStepRow), (x) => x.taskId);
  const signalsBy = groupBy(signals.map(toSignalRow), (x) => x.taskId);
  return taken.map((row) => {
    const task = toTaskRow(row);
    const claimed: ClaimedTask = { task, event: eventOf(row), steps: stepsBy.get(task.id) ?? [], signals: signalsBy.get(task.id) ?? [] };
    if (heldRow(r, row)) claimed.journalOmitted = true;
    return claimed;
  });
}

/** Whether a claimed row was a claim or the reclaim of an expired lease (the statement's `p_pri`). */
function eventOf(row: Record<string, unknown>): 'claim' | 'reclaim' {
  return row.p_pri === 0 ? 'reclaim' : 'claim';
}

/** Whether the claimer holds the claimed row's journal already (see `journalHeld`). */
function heldRow(r: ClaimRequest, row: Record<string, unknown>): boolean {
  return journalHeld(r, { id: String(row.id), epoch: Number(row.epoch) }, eventOf(row));
}

/**
 * Remaining capacity per capped workflow. Claimers of a capped workflow serialize on an advisory
 * lock (taken in name order, so two claimers never deadlock), then count leased tasks with a
 * fresh snapshot that includes every claim committed before the lock was granted.
 */
async function roomOf(c: PgContext, client: ClientBase, r: ClaimRequest): Promise<Map<string, number>> {
  const room = capsOf(r);
  if (!room.size) return room;
  const names = [...room.keys()].sort();
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k', [names.map((wf) => `stepwise:cap:${c.schema}:${wf}`)]);
  const counts = await rows(c, client, leasedCountSql(c.t), [names]);
  subtractLeased(
    room,
    counts.map((row) => ({ workflow: String(row.workflow), n: Number(row.n) })),
  );
  return room;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const list = out.get(key(item));
    if (list) list.push(item);
    else out.set(key(item), [item]);
  }
  return out;
}
