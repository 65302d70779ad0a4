/**
 * @module approvals/closer
 * Internal: not part of the public API (the package exports only its index modules).
 * Open approvals of tasks that ended. A task that is cancelled, fails or succeeds while an
 * approval of it is open (`pending`, `escalated`) will never read a decision: the approval is
 * closed as `expired`, its outcome a rejection that says so (`taskEnded`: the task's status), with
 * an `approval:decided` entry by the system actor `task-ended`. Closing is a compare-and-set on the
 * record, allowed only while the task is still ended (a task retried in between keeps its
 * approval), so two closers, or a closer racing a retry, act once.
 *
 * Who closes: every worker, on a periodic sweep (its `dwellScanMs`) of the open approvals, which
 * finds those of tasks ended by any process (one that crashed included). Until then the reviewers' queue does not show them: `engine.approvals()` lists open
 * approvals only of live tasks.
 */
import { FINISHED_STATUSES, type TaskStatus } from '../lifecycle.ts';
import type { Clock } from '../clock.ts';
import type { ApprovalRow, Store } from '../store.ts';
import { decidedEntry } from './entries.ts';
import type { ApprovalDecision } from './types.ts';

export const TASK_ENDED_ACTOR = { kind: 'system' as const, id: 'task-ended' };
const OPEN = ['pending', 'escalated'] as const;
/** Approvals closed per sweep (the next sweep takes the rest). */
const PAGE = 200;

/** The outcome of an approval closed because its task ended (or was retried past it) in `status`. */
export function endedOutcome(row: ApprovalRow, status: TaskStatus): ApprovalDecision {
  return { approved: false, by: null, comment: null, data: null, timedOut: false, escalations: row.level - 1, taskEnded: status };
}

/** Closes one open approval of an ended task; false if it moved meanwhile or the task is live again. */
async function closeOne(store: Store, clock: Clock, row: ApprovalRow): Promise<boolean> {
  const task = await store.getTask(row.taskId);
  const status = task?.status ?? 'cancelled';
  if (task && !FINISHED_STATUSES.includes(task.status)) return false;
  const at = clock.now();
  const outcome = endedOutcome(row, status);
  const updated = await store.updateApproval({
    id: row.id,
    version: row.version,
    at,
    taskStatuses: FINISHED_STATUSES,
    set: { status: 'expired', outcome: JSON.stringify(outcome), decidedAt: at },
    log: [decidedEntry(row, outcome, 'expired', TASK_ENDED_ACTOR)],
  });
  return updated !== null;
}

/**
 * Closes the open approvals of ended tasks (of one task with `taskId`), up to a page; returns how
 * many it closed.
 */
export async function closeEndedApprovals(store: Store, clock: Clock, taskId?: string): Promise<number> {
  const rows = await store.listApprovals({ statuses: OPEN, taskStatuses: FINISHED_STATUSES, limit: PAGE, ...(taskId !== undefined ? { taskId } : {}) });
  let closed = 0;
  for (const row of rows) if (await closeOne(store, clock, row)) closed++;
  return closed;
}

/** A worker's closer: a sweep every `intervalMs` (real time), one at a time; errors go to `onError` (the next sweep tries again). */
export class ApprovalCloser {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #onError: (error: unknown) => void;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> = Promise.resolve();

  constructor(store: Store, clock: Clock, intervalMs: number, onError: (error: unknown) => void) {
    this.#store = store;
    this.#clock = clock;
    this.#intervalMs = intervalMs;
    this.#onError = onError;
  }

  start(): void {
    this.#timer ??= setInterval(() => this.#run(), this.#intervalMs);
    this.#timer.unref?.();
    this.#run();
  }

  #run(): void {
    this.#running = this.#running.then(() => closeEndedApprovals(this.#store, this.#clock)).catch((e: unknown) => this.#onError(e));
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
