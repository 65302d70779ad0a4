/**
 * @module sqlite/claim
 * Internal: not part of the public API.
 * Claims on SQLite, in one `BEGIN IMMEDIATE` transaction: expired leases first, then due tasks,
 * read a window at a time from the partial indexes; the picked tasks are leased and come back with
 * their journal and their pending signals.
 */
import { capsOf, nextWindow, servedSet, subtractLeased, takeWindow, type KeyRoom, type PickedTask } from '../claim-plan.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { toSignalRow, toTaskRow } from '../rows.ts';
import { transitionEntry } from '../log-entries.ts';
import type { ClaimRequest, ClaimedTask, SignalRow } from '../store.ts';
import { journalHeld } from '../store/leases.ts';
import type { Raw, SqliteContext } from './context.ts';
import { NOT_HELD } from './key-queues.ts';
import { CLAIM_TASK_SQL, DUE_INDEX, LEASED_INDEX, LEASED_SQL, inList, statusTerm } from './sql.ts';

/** `(+workflow IN (…) OR (+workflow = ? AND workflow_version IN (…)) …)`: the workflows (and versions) a worker serves. */
function servedClause(workflows: readonly string[], versions: ClaimRequest['versions']): { sql: string; params: unknown[] } {
  const { any, pinned } = servedSet(workflows, versions);
  const parts: string[] = [];
  const params: unknown[] = [];
  if (any.length) {
    parts.push(`+workflow IN (${inList(any.length)})`);
    params.push(...any);
  }
  for (const [wf, vs] of pinned) {
    parts.push(`(+workflow = ? AND workflow_version IN (${inList(vs.length)}))`);
    params.push(wf, ...vs);
  }
  return { sql: `(${parts.join(' OR ')})`, params };
}

/** Remaining capacity per capped workflow (tasks in leased statuses count against the cap). */
function room(c: SqliteContext, r: ClaimRequest): Map<string, number> {
  const left = capsOf(r);
  if (!left.size) return left;
  const counts = c
    .stmt(
      `SELECT workflow, COUNT(*) AS n FROM stepwise_tasks WHERE status IN (${LEASED_SQL}) AND lease_expires_at > ?
     AND workflow IN (${inList(left.size)}) GROUP BY workflow`,
    )
    .all(r.now, ...left.keys()) as Array<{ workflow: string; n: number }>;
  subtractLeased(left, counts);
  return left;
}

/**
 * Picks tasks of `from` into `picked`. Candidates are read a window at a time; a workflow at its
 * concurrency cap is left out of the next window, so a capped backlog never hides other workflows' tasks.
 */
function pick(
  c: SqliteContext,
  r: ClaimRequest,
  left: Map<string, number>,
  picked: PickedTask[],
  event: 'claim' | 'reclaim',
  from: readonly TaskStatus[],
  index: readonly TaskStatus[],
  due: string,
  order: string,
): void {
  if (!from.length) return;
  // Claims (not reclaims: an expired lease keeps its place under its key) count keyed tasks.
  const keys: KeyRoom | undefined = event === 'claim' ? { room: new Map(), passed: [] } : undefined;
  for (;;) {
    const window = nextWindow(r, picked, left);
    if (!window) return;
    const served = servedClause(window.allowed, r.versions);
    const taken = [...picked.map((p) => p.id), ...(keys?.passed ?? [])];
    // `+workflow` keeps the planner off the workflow index, which would walk a workflow's
    // whole history; the status term lets it use the partial index of due (or expired) tasks
    // (named for due tasks: the planner would rather sort the status index's rows by priority).
    const rows = c
      .stmt(
        `SELECT id, status, workflow, lease_owner${keys ? `, concurrency_key, concurrency_limit, ${KEY_USED} AS key_used` : ''} FROM stepwise_tasks t${keys && from.every((s) => index.includes(s)) ? ' INDEXED BY stepwise_tasks_due_order' : ''}
       WHERE ${statusTerm(from, index)}${keys ? ` AND ${NOT_HELD}` : ''} AND ${due} <= ? ${keys ? `AND run_at <= ? AND (concurrency_key IS NULL OR ${KEY_USED} + ${KEY_AHEAD} < concurrency_limit)` : ''} AND ${served.sql}
       ${taken.length ? `AND id NOT IN (${inList(taken.length)})` : ''}
       ORDER BY ${order} LIMIT ?`,
      )
      .all(r.now, ...(keys ? [r.now, r.now] : []), ...served.params, ...taken, window.need) as Raw[];
    if (!takeWindow(rows, window.need, event, left, picked, keys)) return;
  }
}

/** The leased tasks of a row's key (an index probe of `stepwise_tasks_concurrency_key`). */
const KEY_USED = `(SELECT count(*) FROM stepwise_tasks x WHERE x.concurrency_key = t.concurrency_key AND x.status IN (${LEASED_SQL}))`;
/**
 * The due tasks of a row's key ahead of it (at most 100: SQLite's LIMIT cannot name the row's
 * limit), read from `stepwise_tasks_key_due`: a task is a candidate only at the head of its key's
 * queue, so one window brings no more tasks of a key than it has room for (the room is counted
 * again as the window is taken, see `takeWindow`, which is what holds the limit).
 */
const KEY_AHEAD = `(SELECT count(*) FROM (SELECT 1 FROM stepwise_tasks y WHERE y.concurrency_key = t.concurrency_key AND y.status IN ('pending', 'waiting')
  AND y.run_at <= ? AND ((y.run_at - y.priority * 1000), y.id) < ((t.run_at - t.priority * 1000), t.id) LIMIT 100))`;
/** The order of due tasks: `run_at` moved earlier by one second per unit of priority (ageing). */
const DUE_ORDER = '(run_at - priority * 1000)';

/** Pending signals of all picked tasks in one query (a task may be signalled before its first run). */
function pendingSignals(c: SqliteContext, picked: readonly PickedTask[]): Map<string, SignalRow[]> {
  const signalsBy = new Map<string, SignalRow[]>();
  if (!picked.length) return signalsBy;
  const pending = c.stmt(`SELECT * FROM stepwise_signals WHERE task_id IN (${inList(picked.length)}) AND consumed_seq IS NULL ORDER BY id`).all(...picked.map((p) => p.id)) as Raw[];
  for (const raw of pending) {
    const signal = toSignalRow(raw);
    signalsBy.set(signal.taskId, [...(signalsBy.get(signal.taskId) ?? []), signal]);
  }
  return signalsBy;
}

export function claim(c: SqliteContext, r: ClaimRequest): ClaimedTask[] {
  if (r.limit <= 0 || r.workflows.length === 0) return [];
  return c.tx(() => {
    const picked: PickedTask[] = [];
    const left = room(c, r);
    // Expired leases first: their tasks have waited longest.
    pick(c, r, left, picked, 'reclaim', r.reclaim.from, LEASED_INDEX, 'lease_expires_at', 'lease_expires_at, id');
    pick(c, r, left, picked, 'claim', r.claim.from, DUE_INDEX, DUE_ORDER, `${DUE_ORDER}, id`);
    const expires = r.now + r.leaseMs;
    const signalsBy = pendingSignals(c, picked);
    if (picked.length) c.checkSeqs();
    return picked.map((p) => {
      const to = p.event === 'claim' ? r.claim.to : r.reclaim.to[p.status];
      if (to === undefined) throw new Error(`claim: no reclaim target for status ${p.status}`);
      // The row comes back with its log's last seq, for the claim's entry and the run's checkpoints.
      const raw = c.stmt(CLAIM_TASK_SQL).get(to, r.workerId, expires, r.now, p.id) as Raw;
      c.rememberNo(p.id, Number(raw.no));
      c.knowSeq(Number(raw.no), Number(raw.last_seq));
      const row = toTaskRow(raw);
      const detail = p.event === 'reclaim' ? JSON.stringify({ previousOwner: p.leaseOwner }) : null;
      c.append(Number(raw.no), r.now, [transitionEntry('worker', r.workerId, { event: p.event, from: p.status, to, epoch: row.epoch, detail })]);
      const signals = signalsBy.get(p.id) ?? [];
      if (journalHeld(r, row, p.event)) return { task: row, event: p.event, steps: [], signals, journalOmitted: true };
      // A first run has no journal yet, but a fork's (the rows it copied).
      return { task: row, event: p.event, steps: row.runs > 1 || row.forkedFrom !== null ? c.steps(p.id, Number(raw.no)) : [], signals };
    });
  });
}
