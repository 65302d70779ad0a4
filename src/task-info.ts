/**
 * @module task-info
 * The read model: what `engine.get()` and `engine.list()` return, built from store rows. A task
 * is a discriminated union on `status`: `output` exists only when it succeeded, `error` only when
 * it failed.
 */
import { redoSuffix } from './run/redo.ts';
import { engineKey } from './idempotency/keys.ts';
import { isCleanupSeq } from './run/cleanup-scope.ts';
import type { ApprovalInfo } from './approvals/types.ts';
import type { MachineInfo } from './machine/read.ts';
import type { TaskStatus } from './lifecycle.ts';
import { decodeError, decodeJson, type SerializedError } from './serialize.ts';
import type { StepKind, StepRow, StepStatus, TaskRow } from './store.ts';
import type { TaskEvent } from './task-events.ts';
import { parseSummary, type Budget, type UsageTotals } from './ai/metering/usage.ts';

export interface TaskLease {
  owner: string;
  expiresAt: number;
}

interface TaskSummaryBase {
  id: string;
  workflow: string;
  workflowVersion: string;
  input: unknown;
  idempotencyKey: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  /** When a pending or waiting task is due (ms since epoch); `null` if it waits for a signal only. */
  runAt: number | null;
  /** Runs so far: claims by workers, including resumptions after a crash. */
  runs: number;
  /** User retries of this task after it failed. */
  retries: number;
  /** Fencing epoch of the current (or last) run. */
  epoch: number;
  lease: TaskLease | null;
  /** What a waiting task waits for: `{ kind: 'sleep' | 'retry' | 'event', step, until, … }`. */
  wait: Record<string, unknown> | null;
  pauseRequested: boolean;
  cancelReason: string | null;
  /** What a running step last reported (`step.progress()`), with the step's id and when. */
  progress: { done?: number; total?: number; note?: string; step: string | null; at: number } | null;
  /** When the task must be finished (ms), or null (see `engine.start(…, { deadline })`, `workflow(…, { timeout })`). */
  deadline: number | null;
  /**
   * Model usage so far (`stepwise-engine/ai` calls and `ctx.usage` reports): tokens, cost and
   * attempts for the task and per step id, every attempt counted (failed, cancelled and
   * interrupted ones too), and the budget given at start; `null` if no model was called.
   */
  usage: TaskUsage | null;
  /** A short text naming the task for people (start option `title`, or the workflow's `title(input)`), or null. */
  title: string | null;
  /** The key of a debounced start (`engine.start(…, { debounce })`), or null. */
  debounceKey: string | null;
  /** The key of a singleton start (`engine.start(…, { singleton })`), or null. */
  singletonKey: string | null;
  /** The key of the workflow's per-key concurrency limit (`concurrency: { key, limit }`), computed from the input, or null. */
  concurrencyKey: string | null;
  /** 0..1000, higher first (start option or workflow option `priority`). */
  priority: number;
  /** The task's tags (start option `tags`, `ctx.setTags`, `engine.setTags`); `{}` for none. */
  tags: Record<string, string>;
  /** The task this one was forked from (`engine.fork`), or null. */
  forkedFrom: string | null;
}

/** Usage totals of a task and of each of its steps. */
export interface TaskUsage {
  total: UsageTotals;
  steps: Record<string, UsageTotals>;
  /**
   * `engine.get()` of a task with child tasks: the usage of every task below it (its children,
   * theirs, …), added up; the task's own is `total`.
   */
  children?: UsageTotals;
  budget?: Budget;
}

export type TaskSummary =
  | (TaskSummaryBase & { status: 'succeeded'; output: unknown })
  | (TaskSummaryBase & { status: 'failed'; error: SerializedError })
  | (TaskSummaryBase & { status: Exclude<TaskStatus, 'succeeded' | 'failed'> });

export interface StepInfo {
  /** Position in call order (for a step of the cleanup: from 1,000,000,000 on, in the order recorded). */
  seq: number;
  /**
   * Recorded by the cleanup after a cancel or a failure for good (`onCancel:<name>`,
   * `compensate:<step>`): identified by its name within the cleanup, apart from the code's positions.
   */
  cleanup: boolean;
  /** Step id: name, `#n` from the second occurrence on. */
  name: string;
  kind: StepKind;
  status: StepStatus;
  attempts: number;
  output: unknown;
  error: SerializedError | null;
  startedAt: number | null;
  finishedAt: number | null;
  durationMs: number | null;
  wakeAt: number | null;
  /**
   * The key the step's attempts received: `v1:<task>:<name>#<n>`, or `v<keyVersion>:<key>` for a
   * step with a business key (`:redo<n>` after either once an undo made it run again); `null` for
   * sleeps and event waits.
   */
  idempotencyKey: string | null;
  /** Epoch of the run that recorded it. */
  epoch: number;
}

/** A task's parent, or one of its children, as `engine.get()` names it. */
export interface RelatedTaskInfo {
  /** Its id. */
  id: string;
  /** Its workflow. */
  workflow: string;
  /** Its status when read. */
  status: TaskStatus;
}

/** A task with its journal, its event log and the approvals it asked for (oldest first). */
export type TaskInfo = TaskSummary & {
  /** The task that started this one with `ctx.startChild` / `ctx.child`, or null. */
  parent: RelatedTaskInfo | null;
  /** The tasks this one started with `ctx.startChild` / `ctx.child`, oldest first; of more than 1,000, the newest 1,000 (page through all with `engine.list({ parent })`). */
  children: RelatedTaskInfo[];
  steps: StepInfo[];
  history: TaskEvent[];
  approvals: ApprovalInfo[];
  /** A state machine's task (`machine()`): its state, context, the events it takes now, and its history. */
  machine?: MachineInfo;
};

function taskUsage(text: string | null): TaskUsage | null {
  if (!text) return null;
  const s = parseSummary(text);
  // Per-step totals are added up from the log where a task is read with it (`engine.get`).
  return { total: s.total, steps: {}, ...(s.budget ? { budget: s.budget } : {}) };
}

export function toSummary(row: TaskRow): TaskSummary {
  const base: TaskSummaryBase = {
    id: row.id,
    workflow: row.workflow,
    workflowVersion: row.workflowVersion,
    input: decodeJson(row.input),
    idempotencyKey: row.idempotencyKey,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    finishedAt: row.finishedAt,
    runAt: row.runAt,
    runs: row.runs,
    retries: row.retries,
    epoch: row.epoch,
    lease: row.leaseOwner && row.leaseExpiresAt !== null ? { owner: row.leaseOwner, expiresAt: row.leaseExpiresAt } : null,
    wait: row.wait ? (JSON.parse(row.wait) as Record<string, unknown>) : null,
    pauseRequested: row.pauseRequested,
    cancelReason: row.cancelReason,
    progress: row.progress ? (JSON.parse(row.progress) as TaskSummaryBase['progress']) : null,
    usage: taskUsage(row.usage),
    deadline: row.deadlineAt ?? null,
    title: row.title ?? null,
    debounceKey: row.debounceKey ?? null,
    singletonKey: row.singletonKey ?? null,
    concurrencyKey: row.concurrencyKey === null ? null : row.concurrencyKey.slice(row.workflow.length + 1),
    priority: row.priority,
    tags: row.tags ? (JSON.parse(row.tags) as Record<string, string>) : {},
    forkedFrom: row.forkedFrom,
  };
  if (row.status === 'succeeded') return { ...base, status: 'succeeded', output: decodeJson(row.output) };
  if (row.status === 'failed') {
    return { ...base, status: 'failed', error: row.error ? decodeError(row.error) : { name: 'Error', message: 'unknown error' } };
  }
  return { ...base, status: row.status };
}

/** The base name of a step id (`fetch#2` → `fetch`) and its occurrence (2). */
export function parseStepId(stepId: string): { name: string; occurrence: number } {
  const m = /^(.*)#(\d+)$/.exec(stepId);
  return m ? { name: m[1] as string, occurrence: Number(m[2]) } : { name: stepId, occurrence: 1 };
}

/** A journal row as users see it; `redo`: the task's counts of steps run again after an undo (`run/redo.ts`). */
export function toStepInfo(row: StepRow, redo: string | null = null): StepInfo {
  const { name, occurrence } = parseStepId(row.name);
  return {
    seq: row.seq,
    cleanup: isCleanupSeq(row.seq),
    name: row.name,
    kind: row.kind,
    status: row.status,
    attempts: row.attempts,
    output: decodeJson(row.output),
    error: row.error ? decodeError(row.error) : null,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    durationMs: row.startedAt !== null && row.finishedAt !== null ? row.finishedAt - row.startedAt : null,
    wakeAt: row.wakeAt,
    idempotencyKey: row.kind === 'step' ? (row.businessKey ?? engineKey(row.taskId, name, occurrence)) + redoSuffix(redo, row.name) : null,
    epoch: row.epoch,
  };
}

export { engineKey } from './idempotency/keys.ts';
