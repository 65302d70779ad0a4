/**
 * @module approvals/policy
 * Internal: not part of the public API (the package exports only its index modules).
 * The options of `ctx.approval` checked and stored (the `policy` column), and the pure rules of an
 * approval's life: what a passed deadline does at each level, when the next reminder falls, and
 * what a new decision does (quorum: distinct listed approvers; one rejection rejects).
 */
import { toMs } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkText } from '../text-rules.ts';
import type { ApprovalPatch, ApprovalRow } from '../store.ts';
import type { ApprovalDecision, ApprovalOptions, TimeoutPolicy } from './types.ts';

/** A timeout policy as stored. */
export type StoredPolicy = { kind: 'reject' } | { kind: 'approve' } | { kind: 'escalate'; to: string[]; timeoutMs: number; then: StoredPolicy; handover?: boolean };

export interface StoredOptions {
  timeoutMs: number | null;
  onTimeout: StoredPolicy;
  remindEveryMs: number | null;
}

/** A decision as stored in the `decisions` column (times in ms). */
export interface StoredDecision {
  by: string;
  approve: boolean;
  comment: string | null;
  data: unknown;
  at: number;
  idempotencyKey: string | null;
}

const NAME_MAX = 200;

export function checkApprover(name: unknown, what: string): string {
  if (typeof name !== 'string' || !name || name.length > NAME_MAX) throw new InvalidArgumentError(`${what} must be a name of 1-${NAME_MAX} characters, got ${JSON.stringify(name)}.`);
  return checkText(name, what);
}

function approverList(list: unknown, what: string): string[] {
  if (!Array.isArray(list)) throw new InvalidArgumentError(`${what} must be a list of names.`);
  return [...new Set(list.map((n, i) => checkApprover(n, `${what}[${i}]`)))];
}

function storedPolicy(p: TimeoutPolicy | undefined, what: string, depth = 0): StoredPolicy {
  if (p === undefined || p === 'reject') return { kind: 'reject' };
  if (p === 'approve') return { kind: 'approve' };
  if (typeof p !== 'object' || p === null || !('escalate' in p)) {
    throw new InvalidArgumentError(`${what} must be 'reject', 'approve' or { escalate: [names], timeout, then }, got ${JSON.stringify(p)}.`);
  }
  if (depth >= 20) throw new InvalidArgumentError(`${what}: an escalation chain has at most 20 levels.`);
  const to = approverList(p.escalate, `${what}.escalate`);
  if (!to.length) throw new InvalidArgumentError(`${what}.escalate must name at least one approver.`);
  if (p.timeout === undefined) throw new InvalidArgumentError(`${what}: an escalation needs its own timeout (how long the escalated level waits).`);
  if (p.handover !== undefined && typeof p.handover !== 'boolean') throw new InvalidArgumentError(`${what}.handover must be true or false.`);
  const unknown = Object.keys(p).filter((k) => !['escalate', 'timeout', 'then', 'handover'].includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${what}: unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (known: escalate, timeout, then, handover).`);
  return {
    kind: 'escalate',
    to,
    timeoutMs: toMs(p.timeout, `${what}.timeout`),
    then: storedPolicy(p.then, `${what}.then`, depth + 1),
    ...(p.handover ? { handover: true } : {}),
  };
}

const OPTION_KEYS = ['payload', 'approvers', 'timeout', 'onTimeout', 'remindEvery', 'quorum'];

/**
 * The shortest interval between reminders. Each reminder is a log entry and an observer call: an
 * interval of a few milliseconds would flood the log and the people reminded.
 */
export const MIN_REMIND_EVERY_MS = 1000;

function remindEveryMs(value: ApprovalOptions['remindEvery'], what: string): number {
  const ms = toMs(value as NonNullable<ApprovalOptions['remindEvery']>, `${what} remindEvery`);
  if (ms < MIN_REMIND_EVERY_MS) {
    throw new InvalidArgumentError(`${what}: remindEvery must be at least 1s (${MIN_REMIND_EVERY_MS} ms) between reminders, got ${JSON.stringify(value)} (${ms} ms).`);
  }
  return ms;
}

/** The options of `ctx.approval(name, options)` checked: the approvers, quorum and stored policy. */
export function resolveOptions(name: string, options: ApprovalOptions): { approvers: string[]; quorum: number; stored: StoredOptions } {
  const what = `ctx.approval("${name}")`;
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError(`${what}: options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !OPTION_KEYS.includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${what}: unknown option(s) ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${OPTION_KEYS.join(', ')}).`);
  const approvers = options.approvers === undefined ? [] : approverList(options.approvers, `${what} approvers`);
  const quorum = options.quorum ?? 1;
  if (!Number.isInteger(quorum) || quorum < 1) throw new InvalidArgumentError(`${what}: quorum must be a whole number ≥ 1, got ${String(quorum)}.`);
  if (quorum > 1 && approvers.length < quorum) {
    throw new InvalidArgumentError(`${what}: a quorum of ${quorum} needs at least ${quorum} listed approvers, got ${approvers.length}.`);
  }
  if (options.onTimeout !== undefined && options.timeout === undefined) {
    throw new InvalidArgumentError(`${what}: onTimeout needs a timeout (when the first level's deadline passes).`);
  }
  return {
    approvers,
    quorum,
    stored: {
      timeoutMs: options.timeout === undefined ? null : toMs(options.timeout, `${what} timeout`),
      onTimeout: storedPolicy(options.onTimeout, `${what} onTimeout`),
      remindEveryMs: options.remindEvery === undefined ? null : remindEveryMs(options.remindEvery, what),
    },
  };
}

/** The policy that applies when the deadline of `level` (1 first) passes. */
export function policyAt(stored: StoredOptions, level: number): StoredPolicy {
  let p = stored.onTimeout;
  for (let l = 1; l < level && p.kind === 'escalate'; l++) p = p.then;
  return p;
}

export const isOpen = (status: ApprovalRow['status']): boolean => status === 'pending' || status === 'escalated';

/** The first reminder time after `now` in the series that started at `from`. */
export function nextReminder(from: number, everyMs: number, now: number): number {
  // An approval stored before the minimum was enforced is reminded at most that often too.
  const every = Math.max(everyMs, MIN_REMIND_EVERY_MS);
  return now < from ? from : from + (Math.floor((now - from) / every) + 1) * every;
}

/** What a passed deadline does to an open approval at `now`. */
export type DeadlineChange =
  { kind: 'escalated'; set: ApprovalPatch; added: string[]; approvers: string[] } | { kind: 'decided'; set: ApprovalPatch; outcome: ApprovalDecision; policy: 'approve' | 'reject' };

export function onDeadline(row: ApprovalRow, stored: StoredOptions, now: number): DeadlineChange {
  const p = policyAt(stored, row.level);
  const escalations = row.level - 1;
  if (p.kind === 'escalate') {
    const before = JSON.parse(row.approvers) as string[];
    // `handover`: the escalation's approvers replace the earlier ones; otherwise they are added.
    const approvers = p.handover ? [...p.to] : [...new Set([...before, ...p.to])];
    // The new level's time runs from the deadline that passed, so a late look does not extend it.
    const deadline = (row.deadline ?? now) + p.timeoutMs;
    const remindAt = stored.remindEveryMs === null ? null : nextReminder(row.deadline ?? now, stored.remindEveryMs, now);
    return {
      kind: 'escalated',
      added: p.to.filter((n) => !before.includes(n)),
      approvers,
      set: { status: 'escalated', level: row.level + 1, approvers: JSON.stringify(approvers), deadline, remindAt },
    };
  }
  const approved = p.kind === 'approve';
  const outcome: ApprovalDecision = { approved, by: null, comment: null, data: null, timedOut: true, escalations };
  return {
    kind: 'decided',
    policy: p.kind,
    outcome,
    set: { status: approved ? 'approved' : 'expired', outcome: JSON.stringify(outcome), decidedAt: now, remindAt: null },
  };
}

/** What a new decision does: the approval's new columns, and its outcome if it settles it. */
export function applyDecision(row: ApprovalRow, d: StoredDecision): { set: ApprovalPatch; outcome: ApprovalDecision | null; decisions: StoredDecision[] } {
  const decisions = [...(JSON.parse(row.decisions) as StoredDecision[]), d];
  const approving = new Set(decisions.filter((x) => x.approve).map((x) => x.by));
  const settles = !d.approve || approving.size >= row.quorum;
  if (!settles) return { set: { decisions: JSON.stringify(decisions) }, outcome: null, decisions };
  const outcome: ApprovalDecision = { approved: d.approve, by: d.by, comment: d.comment, data: d.data ?? null, timedOut: false, escalations: row.level - 1 };
  return {
    set: { decisions: JSON.stringify(decisions), status: d.approve ? 'approved' : 'rejected', outcome: JSON.stringify(outcome), decidedAt: d.at, remindAt: null },
    outcome,
    decisions,
  };
}

/** The signal name that wakes the run waiting for approval `id` (reserved: users cannot send it). */
export const wakeName = (id: string): string => `approval:${id}`;
export const RESERVED_SIGNAL_PREFIX = 'approval:';
