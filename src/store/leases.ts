/**
 * @module store/leases
 * Claims and leases: what a worker asks for, holds, renews and loses.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { SignalRow, StepRow, TaskPatch, TaskRow } from './rows.ts';

/*
 * Leases and time: `now` in the requests below is the caller's clock. SQLite judges and grants
 * leases by it; PostgreSQL judges and grants them by the database's clock (`leaseMs` from the
 * database's now) and uses `now` only for due times and log timestamps, so that workers whose
 * clocks disagree still agree on whose lease is live.
 */
export interface ClaimRequest {
  workerId: string;
  now: number;
  leaseMs: number;
  limit: number;
  /** Only tasks of these workflows. */
  workflows: readonly string[];
  /**
   * Only these versions of a workflow (tasks started under another version are left to workers
   * that serve it). A workflow without an entry: any version.
   */
  versions?: Readonly<Record<string, readonly string[]>>;
  /** Statuses a due task is claimed from (lifecycle `claim` sources), and the target. */
  claim: { from: readonly TaskStatus[]; to: TaskStatus };
  /**
   * Statuses an expired-lease task is reclaimed from (lifecycle `reclaim` sources), and the target
   * of each (a reclaimed `cancelling` task stays `cancelling`).
   */
  reclaim: { from: readonly TaskStatus[]; to: Readonly<Partial<Record<TaskStatus, TaskStatus>>> };
  /** Per-workflow caps on tasks in leased statuses, across all workers. */
  concurrency?: Readonly<Record<string, number>>;
  /**
   * Tasks whose journal the worker holds in memory, with the epoch it holds it at (a run that
   * parked and was kept). A claim of one of them at the next epoch does not read its journal: its
   * `steps` are empty and `journalOmitted` is set.
   */
  journals?: ReadonlyMap<string, number>;
}

export interface ClaimedTask {
  task: TaskRow;
  event: 'claim' | 'reclaim';
  /** The task's journal, by position (empty when `journalOmitted`). */
  steps: StepRow[];
  signals: SignalRow[];
  /** The journal was not read: the worker holds it (see `ClaimRequest.journals`). */
  journalOmitted?: true;
}

/**
 * Whether a claim leaves the journal of `task` out, the worker holding it (see
 * `ClaimRequest.journals`): a claim (never a reclaim) at the epoch after the one held.
 */
export function journalHeld(r: ClaimRequest, task: { id: string; epoch: number }, event: 'claim' | 'reclaim'): boolean {
  return event === 'claim' && r.journals !== undefined && r.journals.get(task.id) === task.epoch - 1;
}

export interface HeartbeatRequest {
  workerId: string;
  now: number;
  leaseMs: number;
  held: readonly { taskId: string; epoch: number }[];
}

export interface HeldTask {
  taskId: string;
  status: TaskStatus;
  pauseRequested: boolean;
  cancelReason: string | null;
}

/**
 * Expired leases in `from` statuses are moved to `to` with a `transition` log entry (`event`, actor
 * system `lease-expiry`, detail `{ reason: 'lease expired', previousOwner }`, plus `note` if given).
 */
export interface ExpireRequest {
  now: number;
  event: string;
  from: readonly TaskStatus[];
  to: TaskStatus;
  set: TaskPatch;
  /**
   * Only leases that expired at least this long ago (0 by default: every expired lease). Judged
   * like expiry itself (by the database's clock on PostgreSQL, by `now` on SQLite).
   */
  expiredForMs?: number;
  /** Added to the entry's detail as `note`, with `{workflow}` and `{version}` replaced by the task's. */
  note?: string;
}

export interface NextRunRequest {
  workflows: readonly string[];
  after: number;
}

/** Claims, heartbeats and the expiry of leases. */
export interface LeaseStore {
  claim(request: ClaimRequest): Promise<ClaimedTask[]>;
  heartbeat(request: HeartbeatRequest): Promise<HeldTask[]>;
  expireLeases(request: ExpireRequest): Promise<number>;
  /** The workers holding live leases (for finding owners that died on this host). */
  leaseOwners(now: number): Promise<string[]>;
  /**
   * Ends the leases of `owner` now (their expiry set to `now`), so that the next claim reclaims its
   * tasks: for an owner known to be dead. No status changes; the reclaim records the previous owner.
   */
  endLeasesOf(owner: string, now: number): Promise<number>;
  /**
   * When the next pending or waiting task of these workflows falls due: the earliest `runAt`
   * later than `after`, or `null` if none is scheduled. Lets an idle worker sleep until then.
   */
  nextRunAt(request: NextRunRequest): Promise<number | null>;
}
