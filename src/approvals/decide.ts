/**
 * @module approvals/decide
 * Internal: not part of the public API (the package exports only its index modules).
 * `engine.decide(approvalId, { approve, by, comment, data, idempotencyKey })` and the reviewer's
 * queries. A decision names one approval record, so it can only ever settle that one. It is
 * checked against what is recorded, in this order:
 * - a repeat (the same idempotency key, or the same person deciding the same way again) returns
 *   the approval as it is and changes nothing; the same key for another decision, or a person
 *   reversing their decision, is a CONFLICT naming the recorded decision;
 * - someone not listed (at the approval's level) is FORBIDDEN; a task that ended is TASK_ENDED;
 * - an approval its timeout policy settled takes no contrary decision (`ApprovalExpiredError`,
 *   FORBIDDEN, saying what the policy did); one settled by a person takes no contrary decision
 *   (CONFLICT naming the outcome); a concurring one is answered with the approval as it is.
 * The deadline is checked in the transaction that writes the decision, by the store's clock (the
 * later of the engine's clock and the database's): a deadline that passed is applied first, as
 * the waiting run would apply it (see `judge.ts`), so a late decision gets what the timeout policy
 * gives even before a worker looked, and an escalation's approvers may decide at once.
 * The decision is written with compare-and-set on the record, with its log entries and, when it
 * settles the approval, the signal that makes the parked task due, all in one transaction: when
 * `decide` returns, the decision is durable and the task runnable (announced to other processes).
 */
import { APPROVALS_QUERY, checkOptionKeys } from '../option-keys.ts';
import { ConcurrentUpdateError, InvalidArgumentError, TaskEndedError, ApprovalNotFoundError } from '../errors.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { encodeArgument } from '../limits.ts';
import { checkKey, checkText } from '../text-rules.ts';
import type { Clock } from '../clock.ts';
import type { ApprovalRow, ApprovalStatus, Store, WakeEvent } from '../store.ts';
import { notice, toApprovalInfo } from './info.ts';
import { judge, type Decision, type Judgement } from './judge.ts';
import { checkApprover, isOpen } from './policy.ts';
import type { ApprovalInfo, ApprovalNotice, ApprovalsQuery, DecideOptions } from './types.ts';

/** What `decide` needs from the engine. */
export interface DecideHost {
  store: Store;
  clock: Clock;
  payloadBytes: number;
  /** Tells this process's workers and log readers (the store announces it to other processes). */
  delivered(wake: WakeEvent, taskId: string): void;
  tell(notice: ApprovalNotice): void;
  hasObservers: boolean;
}

/** Tasks in these statuses take decisions; the others have ended or are being cancelled. */
const LIVE: readonly TaskStatus[] = ['pending', 'running', 'waiting', 'paused'];
const DECIDE_OPTIONS = ['approve', 'by', 'roles', 'comment', 'data', 'idempotencyKey'];
const COMMENT_MAX = 10_000;
const STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'rejected', 'expired', 'escalated'];

function checkOptions(id: unknown, o: DecideOptions, payloadBytes: number): { data: string | null } {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('decide() needs an approval id.');
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('decide(id, { approve, by }) needs its options.');
  if (typeof o.approve !== 'boolean') throw new InvalidArgumentError('decide(): `approve` must be true or false.');
  const unknown = Object.keys(o).filter((k) => !DECIDE_OPTIONS.includes(k));
  if (unknown.length) throw new InvalidArgumentError(`decide(): unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${DECIDE_OPTIONS.join(', ')}).`);
  if (o.roles !== undefined && (!Array.isArray(o.roles) || o.roles.some((r) => typeof r !== 'string' || !r))) {
    throw new InvalidArgumentError('decide(): `roles` must be a list of role names.');
  }
  checkApprover(o.by, 'decide(): `by`');
  if (o.comment !== undefined && (typeof o.comment !== 'string' || o.comment.length > COMMENT_MAX)) {
    throw new InvalidArgumentError(`decide(): a comment is a string of at most ${COMMENT_MAX} characters.`);
  }
  if (o.comment !== undefined) checkText(o.comment, 'The comment');
  const key = o.idempotencyKey;
  if (key !== undefined) checkKey(key, 'The idempotencyKey');
  return { data: encodeArgument(o.data, 'The data of a decision', payloadBytes, 'payloadBytes') };
}

export async function decide(host: DecideHost, id: string, o: DecideOptions): Promise<ApprovalInfo> {
  const { data } = checkOptions(id, o, host.payloadBytes);
  const d: Decision = { by: o.by, roles: o.roles ?? [], approve: o.approve, comment: o.comment ?? null, data: data === null ? null : JSON.parse(data), key: o.idempotencyKey ?? null, at: 0 };
  for (let attempt = 0; attempt < 20; attempt++) {
    const row = await host.store.getApproval(id);
    if (!row) throw new ApprovalNotFoundError(id);
    d.at = host.clock.now();
    const local = judge(row, d, d.at);
    // A settled record, or an open one whose refusal no deadline can change, is answered as it is.
    if (!isOpen(row.status) || (row.deadline === null && local.change === null)) {
      if (local.refusal) throw local.refusal;
      return repeatNote(toApprovalInfo(row), d);
    }
    if (local.refusal === null && local.change !== null) await checkTaskLive(host, row.taskId, id);
    // Judged again in the write's transaction, by the store's clock: a deadline that passed is
    // applied first, and the decision stands or falls on the record that results.
    const seen: { verdict?: Judgement } = {};
    const updated = await host.store.updateApproval({
      id,
      version: row.version,
      set: {},
      log: [],
      at: d.at,
      taskStatuses: LIVE,
      // The payload never changes once asked: the one read above is whole, where the row in the
      // store's transaction may hold a payload store's reference to it.
      plan: (cur, now) => (seen.verdict = judge({ ...cur, payload: row.payload }, d, now)).change,
    });
    const verdict = seen.verdict;
    if (!updated || !verdict) {
      // Another decision or a timeout came first, or the task ended: look again. A settled approval
      // answers as it is (a repeat of the decision that settled it gets that answer, even if its task
      // has finished meanwhile); an open one of a task that ended takes no decision.
      const again = await host.store.getApproval(id);
      if (again && isOpen(again.status)) await checkTaskLive(host, row.taskId, id);
      continue;
    }
    if (verdict.change) {
      if (verdict.change.notify) host.delivered(verdict.change.notify, row.taskId);
      if (host.hasObservers) await tellChanged(host, updated, verdict.notices);
    }
    if (verdict.refusal) throw verdict.refusal;
    return repeatNote(toApprovalInfo(updated), d);
  }
  throw new ConcurrentUpdateError(id);
}

/**
 * A repeat of a recorded decision records nothing: if it carried another comment, the answer says
 * so instead of dropping it silently.
 */
function repeatNote(info: ApprovalInfo, d: Decision): ApprovalInfo {
  const mine = info.decisions.find((x) => x.by === d.by && x.approve === d.approve);
  if (!mine || d.comment === null || mine.comment === d.comment) return info;
  const when = mine.at instanceof Date ? mine.at.toISOString() : String(mine.at);
  return {
    ...info,
    notRecorded: {
      comment: d.comment,
      reason: `${d.by} had already ${d.approve ? 'approved' : 'rejected'} this approval at ${when}${mine.comment ? ` ("${mine.comment}")` : ''}; a repeated decision records nothing, so this comment was not recorded.`,
    },
  };
}

async function checkTaskLive(host: DecideHost, taskId: string, id: string): Promise<void> {
  const task = await host.store.getTask(taskId);
  if (!task || !LIVE.includes(task.status)) throw new TaskEndedError(taskId, task?.status ?? 'gone', `the decision on approval ${id}`);
}

async function tellChanged(host: DecideHost, row: ApprovalRow, kinds: Judgement['notices']): Promise<void> {
  if (!kinds.length) return;
  const first = await host.store.getEvents(row.taskId, 0, 1).catch(() => []);
  for (const kind of kinds) host.tell(notice(kind, row, first[0] ? { kind: first[0].actorKind, id: first[0].actorId } : null));
}

/** The approvals matching a query, oldest first. */
export async function listApprovals(store: Store, q: ApprovalsQuery = {}): Promise<ApprovalInfo[]> {
  const statuses = q.status === undefined ? undefined : Array.isArray(q.status) ? (q.status as ApprovalStatus[]) : [q.status as ApprovalStatus];
  for (const s of statuses ?? []) {
    if (!STATUSES.includes(s)) throw new InvalidArgumentError(`Unknown approval status "${String(s)}": use one of ${STATUSES.join(', ')}.`);
  }
  checkOptionKeys(q, APPROVALS_QUERY, 'engine.approvals()');
  const limit = q.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`limit must be an integer from 1 to 1000, got ${limit}.`);
  if (q.approver !== undefined) checkApprover(q.approver, 'approvals(): `approver`');
  if (q.roles !== undefined && (q.approver === undefined || !Array.isArray(q.roles) || q.roles.some((r) => typeof r !== 'string' || !r))) {
    throw new InvalidArgumentError('approvals(): `roles` is a list of role names, given with `approver`.');
  }
  // The reviewers' queue: an open approval of a task that ended (or is being cancelled) takes no
  // decision, so it is left out even before the closer has marked it expired.
  const rows = await store.listApprovals({
    limit,
    openOnlyFor: LIVE,
    ...(statuses ? { statuses } : {}),
    ...(q.approver !== undefined ? { approver: q.approver } : {}),
    ...(q.roles?.length ? { approverRoles: q.roles } : {}),
    ...(q.workflow !== undefined ? { workflow: q.workflow } : {}),
    ...(q.taskId !== undefined ? { taskId: q.taskId } : {}),
  });
  return rows.map(toApprovalInfo);
}
