/**
 * @module approvals/decide
 * Internal: not part of the public API (the package exports only its index modules).
 * `engine.decide(approvalId, { approve, by, comment, data, idempotencyKey })` and the reviewer's
 * queries. A decision names one approval record, so it can only ever settle that one. It is
 * checked against what is recorded, in this order:
 * - a repeat (the same idempotency key, or the same person deciding the same way again) returns
 *   the approval as it is and changes nothing; the same key for another decision, or a person
 *   reversing their decision, is a CONFLICT naming the recorded decision;
 * - someone not listed, or an approval that expired, is FORBIDDEN; a task that ended is TASK_ENDED;
 * - a settled approval takes no contrary decision (CONFLICT naming the outcome); a concurring one
 *   is answered with the approval as it is.
 * The decision is written with compare-and-set on the record, with its log entries and, when it
 * settles the approval, the signal that makes the parked task due, all in one transaction: when
 * `decide` returns, the decision is durable and the task runnable (announced to other processes).
 */
import { ConcurrentUpdateError, ConflictError, ForbiddenError, InvalidArgumentError, TaskEndedError, ApprovalNotFoundError } from '../errors.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { encodeArgument } from '../limits.ts';
import { checkKey, checkText } from '../text-rules.ts';
import type { Clock } from '../clock.ts';
import type { ApprovalRow, ApprovalStatus, Store, WakeEvent } from '../store.ts';
import { decidedEntry, decisionEntry } from './entries.ts';
import { checkDecisionData } from './decision-data.ts';
import { notice, toApprovalInfo } from './info.ts';
import { applyDecision, checkApprover, wakeName, type StoredDecision } from './policy.ts';
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
const COMMENT_MAX = 10_000;
const STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'rejected', 'expired', 'escalated'];

const verb = (approve: boolean): string => (approve ? 'approved' : 'rejected');
const when = (ms: number): string => new Date(ms).toISOString();

function checkOptions(id: unknown, o: DecideOptions, payloadBytes: number): { data: string | null } {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('decide() needs an approval id.');
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('decide(id, { approve, by }) needs its options.');
  if (typeof o.approve !== 'boolean') throw new InvalidArgumentError('decide(): `approve` must be true or false.');
  checkApprover(o.by, 'decide(): `by`');
  if (o.comment !== undefined && (typeof o.comment !== 'string' || o.comment.length > COMMENT_MAX)) {
    throw new InvalidArgumentError(`decide(): a comment is a string of at most ${COMMENT_MAX} characters.`);
  }
  if (o.comment !== undefined) checkText(o.comment, 'The comment');
  const key = o.idempotencyKey;
  if (key !== undefined) checkKey(key, 'The idempotencyKey');
  return { data: encodeArgument(o.data, 'The data of a decision', payloadBytes, 'payloadBytes') };
}

/** How a recorded decision reads in an error message. */
const described = (d: StoredDecision): string => `${d.by} ${verb(d.approve)} it at ${when(d.at)}${d.comment ? ` ("${d.comment}")` : ''}`;

export async function decide(host: DecideHost, id: string, o: DecideOptions): Promise<ApprovalInfo> {
  const { data } = checkOptions(id, o, host.payloadBytes);
  const key = o.idempotencyKey ?? null;
  for (let attempt = 0; attempt < 20; attempt++) {
    const row = await host.store.getApproval(id);
    if (!row) throw new ApprovalNotFoundError(id);
    const decisions = JSON.parse(row.decisions) as StoredDecision[];
    const byKey = key === null ? undefined : decisions.find((d) => d.idempotencyKey === key);
    if (byKey) {
      if (byKey.by === o.by && byKey.approve === o.approve) return toApprovalInfo(row);
      throw new ConflictError(`Key "${key}" of approval ${id} was used for another decision: ${described(byKey)}. Use a new key for a new decision.`, { recorded: byKey });
    }
    const mine = decisions.find((d) => d.by === o.by);
    if (mine) {
      if (mine.approve === o.approve) return toApprovalInfo(row);
      throw new ConflictError(`Approval ${id} ("${row.name}") already has a decision by ${o.by}: ${described(mine)}. A recorded decision cannot be reversed.`, { recorded: mine });
    }
    const approvers = JSON.parse(row.approvers) as string[];
    if (approvers.length && !approvers.includes(o.by)) {
      throw new ForbiddenError(`${o.by} may not decide approval ${id} ("${row.name}"): its approvers are ${approvers.join(', ')}.`, { actor: o.by });
    }
    if (row.status === 'expired' && row.outcome && (JSON.parse(row.outcome) as { taskEnded?: string }).taskEnded) {
      const ended = (JSON.parse(row.outcome) as { taskEnded: string }).taskEnded;
      throw new TaskEndedError(row.taskId, ended, `the decision on approval ${id}`);
    }
    if (row.status === 'expired') {
      throw new ForbiddenError(
        `Approval ${id} ("${row.name}") expired at ${when(row.decidedAt ?? row.deadline ?? row.createdAt)} with no decision and was rejected by its timeout policy; it takes no decisions.`,
        { actor: o.by },
      );
    }
    if (row.status === 'approved' || row.status === 'rejected') {
      const outcome = JSON.parse(row.outcome as string) as { approved: boolean; by: string | null };
      if (outcome.approved === o.approve) return toApprovalInfo(row);
      const first = outcome.by ? `by ${outcome.by}` : 'by its timeout policy';
      throw new ConflictError(`Approval ${id} ("${row.name}") was already ${verb(outcome.approved)} ${first} at ${when(row.decidedAt as number)}; a contrary decision cannot be recorded.`, {
        recorded: outcome,
      });
    }
    checkDecisionData(row, o.approve, data === null ? null : JSON.parse(data));
    const task = await host.store.getTask(row.taskId);
    if (!task || !LIVE.includes(task.status)) throw new TaskEndedError(row.taskId, task?.status ?? 'gone', `the decision on approval ${id}`);
    const decision: StoredDecision = {
      by: o.by,
      approve: o.approve,
      comment: o.comment ?? null,
      data: data === null ? null : JSON.parse(data),
      at: host.clock.now(),
      idempotencyKey: key,
    };
    const next = applyDecision(row, decision);
    const wake: WakeEvent = { reason: 'task', taskId: row.taskId, workflow: row.workflow };
    const log = [decisionEntry(row, decision)];
    if (next.outcome) log.push(decidedEntry(row, next.outcome, next.set.status as string, { kind: 'user', id: o.by }));
    const updated = await host.store.updateApproval({
      id,
      version: row.version,
      set: next.set,
      at: decision.at,
      log,
      taskStatuses: LIVE,
      ...(next.outcome ? { wake: { name: wakeName(id), key: wakeName(id) }, notify: wake } : {}),
    });
    if (!updated) continue; // another decision or a timeout came first, or the task ended: look again
    host.delivered(wake, row.taskId);
    if (next.outcome && host.hasObservers) await tellDecided(host, updated);
    return toApprovalInfo(updated);
  }
  throw new ConcurrentUpdateError(id);
}

async function tellDecided(host: DecideHost, row: ApprovalRow): Promise<void> {
  const first = await host.store.getEvents(row.taskId, 0, 1).catch(() => []);
  host.tell(notice('decided', row, first[0] ? { kind: first[0].actorKind, id: first[0].actorId } : null));
}

/** The approvals matching a query, oldest first. */
export async function listApprovals(store: Store, q: ApprovalsQuery = {}): Promise<ApprovalInfo[]> {
  const statuses = q.status === undefined ? undefined : Array.isArray(q.status) ? (q.status as ApprovalStatus[]) : [q.status as ApprovalStatus];
  for (const s of statuses ?? []) {
    if (!STATUSES.includes(s)) throw new InvalidArgumentError(`Unknown approval status "${String(s)}": use one of ${STATUSES.join(', ')}.`);
  }
  const limit = q.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`limit must be an integer from 1 to 1000, got ${limit}.`);
  if (q.approver !== undefined) checkApprover(q.approver, 'approvals(): `approver`');
  // The reviewers' queue: an open approval of a task that ended (or is being cancelled) takes no
  // decision, so it is left out even before the closer has marked it expired.
  const rows = await store.listApprovals({
    limit,
    openOnlyFor: LIVE,
    ...(statuses ? { statuses } : {}),
    ...(q.approver !== undefined ? { approver: q.approver } : {}),
    ...(q.workflow !== undefined ? { workflow: q.workflow } : {}),
    ...(q.taskId !== undefined ? { taskId: q.taskId } : {}),
  });
  return rows.map(toApprovalInfo);
}
