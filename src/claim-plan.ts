/**
 * @module claim-plan
 * Internal: not part of the public API.
 * The part of a claim that does not depend on the SQL dialect, shared by both stores: which
 * workflows (and versions) a worker serves, the room left under each per-workflow concurrency
 * cap (cap minus the tasks it holds leased), and how the candidates a store reads, one window at
 * a time, are taken within that room. The stores only turn these into statements and run them.
 */
import type { TaskStatus } from './lifecycle.ts';
import type { ClaimRequest } from './store.ts';

/** A candidate taken by a claim, before its row is updated. */
export interface PickedTask {
  id: string;
  status: TaskStatus;
  leaseOwner: string | null;
  event: 'claim' | 'reclaim';
}

/** A row a candidate query returns: `id`, `status`, `workflow`, `lease_owner`. */
type CandidateRow = Record<string, unknown>;

/**
 * The served set: workflows served at any version, and those served only at the versions listed
 * (a workflow listed with no version is not served).
 */
export function servedSet(workflows: readonly string[], versions: ClaimRequest['versions']): { any: string[]; pinned: Array<[workflow: string, versions: readonly string[]]> } {
  const any = workflows.filter((wf) => !versions?.[wf]);
  const pinned: Array<[string, readonly string[]]> = [];
  for (const wf of workflows) {
    const vs = versions?.[wf];
    if (vs?.length) pinned.push([wf, vs]);
  }
  return { any, pinned };
}

/** Whether the claim serves a workflow that has a concurrency cap. */
export function isCapped(r: ClaimRequest): boolean {
  return Object.keys(r.concurrency ?? {}).some((wf) => r.workflows.includes(wf));
}

/**
 * The capped workflows the claim serves, each with its cap: the room before the store subtracts
 * the tasks each holds leased ({@link subtractLeased}). Uncapped workflows have no entry.
 */
export function capsOf(r: ClaimRequest): Map<string, number> {
  const room = new Map<string, number>();
  for (const [wf, cap] of Object.entries(r.concurrency ?? {})) if (r.workflows.includes(wf)) room.set(wf, cap);
  return room;
}

/** Takes each workflow's count of leased tasks off its room. */
export function subtractLeased(room: Map<string, number>, counts: Iterable<{ workflow: string; n: number }>): void {
  for (const c of counts) room.set(c.workflow, (room.get(c.workflow) ?? 0) - c.n);
}

/**
 * The next window of candidates to read: how many are still needed and the workflows that still
 * have room; null when the claim is done (enough picked, or every workflow at its cap).
 */
export function nextWindow(r: ClaimRequest, picked: readonly PickedTask[], room: ReadonlyMap<string, number>): { need: number; allowed: string[] } | null {
  const need = r.limit - picked.length;
  const allowed = r.workflows.filter((wf) => (room.get(wf) ?? 1) > 0);
  if (need <= 0 || !allowed.length) return null;
  return { need, allowed };
}

/**
 * Takes a window's candidates (in order) while their workflow has room, counting each against it.
 * Returns whether another window must be read: some row was passed over for want of room (its
 * workflow is then left out of the next window) and the window was full. So the reading ends
 * after at most one window per capped workflow beyond the first.
 */
export function takeWindow(rows: readonly CandidateRow[], need: number, event: PickedTask['event'], room: Map<string, number>, picked: PickedTask[], keys?: KeyRoom): boolean {
  let skipped = false;
  for (const row of rows) {
    if (keys && !takeKey(keys, row)) {
      skipped = true;
      continue;
    }
    const wf = String(row.workflow);
    const left = room.get(wf);
    if (left !== undefined) {
      if (left <= 0) {
        skipped = true;
        continue;
      }
      room.set(wf, left - 1);
    }
    const leaseOwner = event === 'reclaim' ? ((row.lease_owner as string | null) ?? null) : null;
    picked.push({ id: String(row.id), status: row.status as TaskStatus, leaseOwner, event });
  }
  return skipped && rows.length >= need;
}

/**
 * Per-key room within one claim (SQLite, where the claim is the only writer): the room of each
 * key seen (its limit minus the leased tasks the row reported as `key_used`, minus those this
 * claim took), and the ids passed over because their key was full (left out of later windows).
 */
export interface KeyRoom {
  room: Map<string, number>;
  passed: string[];
}

/** Counts a candidate against its key's room; false (and the row passed over) when the key is full. */
function takeKey(keys: KeyRoom, row: CandidateRow): boolean {
  if (row.concurrency_key === null || row.concurrency_key === undefined) return true;
  const key = String(row.concurrency_key);
  const left = keys.room.get(key) ?? Number(row.concurrency_limit) - Number(row.key_used);
  if (left <= 0) {
    keys.passed.push(String(row.id));
    return false;
  }
  keys.room.set(key, left - 1);
  return true;
}
