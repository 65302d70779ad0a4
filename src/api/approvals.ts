/**
 * @module api/approvals
 * The public shapes of approvals: what `ctx.approval` takes and resolves to, what
 * `engine.decide` takes, and the record `engine.approvals()` and `engine.get(id).approvals` list.
 */
import type { Duration } from '../duration.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { ApprovalStatus } from '../store.ts';

export type { ApprovalStatus } from '../store.ts';

/**
 * What happens when an approval's deadline passes with no decision: reject it (the default), approve
 * it (recorded with the policy as the actor), or escalate: add approvers (or, with `handover: true`,
 * hand the approval over to them: the earlier approvers lose the right), set a new deadline, and
 * apply `then` when that one passes too (default `'reject'`).
 */
export type TimeoutPolicy = 'reject' | 'approve' | { escalate: readonly string[]; timeout: Duration; then?: TimeoutPolicy; handover?: boolean };

export interface ApprovalOptions {
  /** What the reviewers look at (JSON): a draft, a diff, a summary. */
  payload?: unknown;
  /** Who may decide: names, or `role:<role>` for anyone with that role (`'role:editor'`). Omitted or empty: anyone may. */
  approvers?: readonly string[];
  /** How long the first level waits for a decision; without it, the approval waits until decided. */
  timeout?: Duration;
  /** What a passed deadline does. @defaultValue 'reject' */
  onTimeout?: TimeoutPolicy;
  /** Emits an `approval:reminded` entry (and observer notice) this often while undecided. */
  remindEvery?: Duration;
  /** How many distinct listed approvers must approve; one rejection rejects. @defaultValue 1 */
  quorum?: number;
}

/** What `ctx.approval` resolves to. */
export interface ApprovalDecision {
  approved: boolean;
  /** Who decided (the approver whose decision settled it); `null` when a timeout policy did. */
  by: string | null;
  comment: string | null;
  /** What the reviewer handed back (an edited draft), or null. */
  data: unknown;
  /** The outcome came from a timeout policy rather than a person. */
  timedOut: boolean;
  /** How many escalation levels were passed (0: decided at the first level). */
  escalations: number;
  /**
   * Set when nobody decided because the task ended first (its status then): the approval was
   * closed as `expired` by the system actor `task-ended`, and no workflow code received it.
   */
  taskEnded?: TaskStatus;
}

/** One decision recorded on an approval. */
export interface ApprovalDecisionRecord {
  by: string;
  approve: boolean;
  comment: string | null;
  data: unknown;
  at: Date;
  idempotencyKey: string | null;
}

/** An approval as users read it. */
export interface ApprovalInfo {
  id: string;
  taskId: string;
  workflow: string;
  name: string;
  /** `escalated`: still open, at an escalation level (see `level`). */
  status: ApprovalStatus;
  approvers: string[];
  quorum: number;
  payload: unknown;
  /** When the current level's timeout passes, or null: no timeout. */
  deadline: Date | null;
  /** 1 at first; each escalation adds one. */
  level: number;
  /**
   * Only in the answer to a repeated decision (the same decider and answer as recorded) that
   * carried another comment: a repeat records nothing, so that comment was not recorded.
   */
  notRecorded?: { comment: string; reason: string };
  decisions: ApprovalDecisionRecord[];
  createdAt: Date;
  decidedAt: Date | null;
  /** What the workflow received (or will receive), once decided. */
  outcome: ApprovalDecision | null;
  /** When the next reminder is due, or null. */
  remindAt: Date | null;
}

export interface DecideOptions {
  approve: boolean;
  /** The approver's name (must be listed in the approval's approvers, when it lists any). */
  by: string;
  /**
   * The decider's roles: an approval that lists `role:<role>` among its approvers (`'role:editor'`:
   * any editor) may be decided by anyone holding that role. The HTTP API passes the token's role.
   */
  roles?: readonly string[];
  comment?: string;
  /** Handed back to the workflow (an edited draft). JSON. */
  data?: unknown;
  /** A repeat with the same key returns the first result; the same key for another decision is a conflict. */
  idempotencyKey?: string;
}

export interface ApprovalsQuery {
  status?: ApprovalStatus | readonly ApprovalStatus[];
  /** Approvals this person may decide. */
  approver?: string;
  /** With `approver`: also the approvals listing one of these roles (`role:<role>`), the approver's roles. */
  roles?: readonly string[];
  workflow?: string;
  taskId?: string;
  /** 1–1000. @defaultValue 100 */
  limit?: number;
}

/** What observers' `onApproval` receives: enough to send an e-mail or a chat message. */
export interface ApprovalNotice {
  kind: 'requested' | 'reminded' | 'escalated' | 'decided';
  approval: ApprovalInfo;
  /** The command that approves it (fill in the approver's name). */
  approveCommand: string;
  rejectCommand: string;
  /** Who started the task (to tell them the outcome, e.g. why it was rejected). */
  startedBy: { kind: string; id: string } | null;
}
