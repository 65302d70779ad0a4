/**
 * @module approvals/judge
 * Internal: not part of the public API (the package exports only its index modules).
 * What a decision does to an approval as it is at a given time: the passed deadlines first (each
 * applies its level's timeout policy, as the waiting run would: the approval settles, or moves to
 * its next level with the escalation's approvers), then the decision checked against the record
 * that results (see `decide.ts` for the order of the checks). Pure: the store calls it in the
 * transaction that writes the decision, with its clock (see `ApprovalUpdate.plan`), so a decision
 * after the deadline gets what the timeout policy gives, whether or not a worker applied it yet.
 */
import { ConflictError, ForbiddenError, TaskEndedError, ApprovalExpiredError } from '../errors.ts';
import type { ApprovalChange, ApprovalPatch, ApprovalRow, NewEvent } from '../store.ts';
import { POLICY_ACTOR, decidedEntry, decisionEntry, escalatedEntry } from './entries.ts';
import { checkDecisionData } from './decision-data.ts';
import { applyDecision, isOpen, onDeadline, wakeName, type StoredDecision, type StoredOptions } from './policy.ts';

/** A decision to judge: who, which way, with what (decoded) data and key, made at `at`. */
export interface Decision {
  by: string;
  /** The decider's roles (`role:<role>` entries of the approvers let them decide). */
  roles: readonly string[];
  approve: boolean;
  comment: string | null;
  data: unknown;
  key: string | null;
  at: number;
}

/** What happened to the approval: the deadlines applied, the kinds of notice they call for. */
export interface Judgement {
  /** The change to write (`null`: none). */
  change: ApprovalChange | null;
  /** The error for the decider (nothing of the decision recorded), or `null` if it stands or repeats one. */
  refusal: Error | null;
  /** The notices the change calls for, in order. */
  notices: Array<'escalated' | 'decided'>;
}

const verb = (approve: boolean): string => (approve ? 'approved' : 'rejected');
const when = (ms: number): string => new Date(ms).toISOString();
const described = (d: StoredDecision): string => `${d.by} ${verb(d.approve)} it at ${when(d.at)}${d.comment ? ` ("${d.comment}")` : ''}`;

/** The record after the deadlines that passed by `now`, with the change and entries that make it so. */
function passDeadlines(row: ApprovalRow, now: number): { row: ApprovalRow; set: ApprovalPatch; log: NewEvent[]; notices: Judgement['notices'] } {
  const stored = JSON.parse(row.policy) as StoredOptions;
  let cur = row;
  const set: ApprovalPatch = {};
  const log: NewEvent[] = [];
  const notices: Judgement['notices'] = [];
  while (isOpen(cur.status) && cur.deadline !== null && now >= cur.deadline) {
    const next = onDeadline(cur, stored, now);
    log.push(
      next.kind === 'escalated'
        ? escalatedEntry(cur, { level: cur.level + 1, approvers: next.approvers, added: next.added, deadline: next.set.deadline ?? null })
        : decidedEntry(cur, next.outcome, next.set.status as string, POLICY_ACTOR(next.policy)),
    );
    notices.push(next.kind);
    Object.assign(set, next.set);
    cur = { ...cur, ...next.set };
  }
  return { row: cur, set, log, notices };
}

/** Whether the decider is listed by name, or holds a role listed as `role:<role>`. */
export function mayDecide(approvers: readonly string[], d: Pick<Decision, 'by' | 'roles'>): boolean {
  return approvers.includes(d.by) || d.roles.some((r) => approvers.includes(`role:${r}`));
}

/** Why the decision cannot be recorded on `row`, `'repeat'` if it is recorded already, or `null` if it can. */
export function refusalOf(row: ApprovalRow, d: Decision): Error | 'repeat' | null {
  const decisions = JSON.parse(row.decisions) as StoredDecision[];
  const byKey = d.key === null ? undefined : decisions.find((x) => x.idempotencyKey === d.key);
  if (byKey) {
    if (byKey.by === d.by && byKey.approve === d.approve) return 'repeat';
    return new ConflictError(`Key "${d.key}" of approval ${row.id} was used for another decision: ${described(byKey)}. Use a new key for a new decision.`, { recorded: byKey });
  }
  const mine = decisions.find((x) => x.by === d.by);
  if (mine) {
    if (mine.approve === d.approve) return 'repeat';
    return new ConflictError(`Approval ${row.id} ("${row.name}") already has a decision by ${d.by}: ${described(mine)}. A recorded decision cannot be reversed.`, { recorded: mine });
  }
  const approvers = JSON.parse(row.approvers) as string[];
  if (approvers.length && !mayDecide(approvers, d)) {
    const roles = d.roles.length ? ` (roles ${d.roles.join(', ')})` : '';
    return new ForbiddenError(`${d.by}${roles} may not decide approval ${row.id} ("${row.name}") at level ${row.level}: its approvers are ${approvers.join(', ')}.`, { actor: d.by });
  }
  const outcome = row.outcome === null ? null : (JSON.parse(row.outcome) as { approved: boolean; by: string | null; taskEnded?: string; timedOut?: boolean });
  if (row.status === 'expired' && outcome?.taskEnded) return new TaskEndedError(row.taskId, outcome.taskEnded, `the decision on approval ${row.id}`);
  if (row.status === 'expired') return new ApprovalExpiredError(row.id, row.name, row.deadline, 'rejected', d.by);
  if ((row.status === 'approved' || row.status === 'rejected') && outcome) {
    if (outcome.approved === d.approve) return 'repeat';
    if (outcome.timedOut) return new ApprovalExpiredError(row.id, row.name, row.deadline, verb(outcome.approved) as 'approved' | 'rejected', d.by);
    return new ConflictError(
      `Approval ${row.id} ("${row.name}") was already ${verb(outcome.approved)} by ${outcome.by ?? 'its timeout policy'} at ${when(row.decidedAt as number)}; a contrary decision cannot be recorded.`,
      { recorded: outcome },
    );
  }
  checkDecisionData(row, d.approve, d.data);
  return null;
}

/** The decision judged on `row` at `now` (see the module). */
export function judge(row: ApprovalRow, d: Decision, now: number): Judgement {
  const passed = passDeadlines(row, now);
  const settledByPolicy = passed.notices.includes('decided');
  // A timeout policy that settles the approval makes the waiting task due, as a decision does.
  const wake = { wake: { name: wakeName(row.id), key: wakeName(row.id) }, notify: { reason: 'task' as const, taskId: row.taskId, workflow: row.workflow } };
  const deadlines: ApprovalChange | null = passed.log.length ? { set: passed.set, log: passed.log, ...(settledByPolicy ? wake : {}) } : null;
  let refusal: Error | 'repeat' | null;
  try {
    refusal = refusalOf(passed.row, d);
  } catch (e) {
    refusal = e as Error;
  }
  if (refusal !== null) return { change: deadlines, refusal: refusal === 'repeat' ? null : refusal, notices: passed.notices };
  const decision: StoredDecision = { by: d.by, approve: d.approve, comment: d.comment, data: d.data, at: d.at, idempotencyKey: d.key };
  const next = applyDecision(passed.row, decision);
  const log = [...passed.log, decisionEntry(passed.row, decision)];
  if (next.outcome) log.push(decidedEntry(passed.row, next.outcome, next.set.status as string, { kind: 'user', id: d.by }));
  return {
    change: { set: { ...passed.set, ...next.set }, log, ...(next.outcome ? wake : {}) },
    refusal: null,
    notices: next.outcome ? [...passed.notices, 'decided'] : passed.notices,
  };
}
