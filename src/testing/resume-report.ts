/**
 * @module testing/resume-report
 * What `checkResume` answers: the report of the crash points it tried, and `ResumeCheckError`, the
 * error it throws at the first one where the resumed task did not do what the run without a crash
 * did. The error's message names the crash point, the step and what differed, with a hint.
 */
import { ERROR_CODES, StepwiseError, isStepwiseError } from '../errors.ts';
import type { WriteInfo } from '../replay/process-store.ts';
import type { JournalCall, StepAttempt, TaskOutcome } from './trial.ts';

export type { WriteInfo } from '../replay/process-store.ts';
export type { JournalCall, StepAttempt, TaskOutcome } from './trial.ts';

/** One crash point: a worker dies right before or right after one of the task's durable writes. */
export interface CrashPoint {
  /** Which durable write (1-based, in the order of `ResumeReport.baseline.writes`). */
  write: number;
  /** How many durable writes the run without a crash made. */
  of: number;
  /**
   * `before`: the write never became durable (the step whose result it carries ran; its checkpoint
   * is lost). `after`: it became durable, and the worker died before doing anything more.
   */
  when: 'before' | 'after';
  /** What the write carries: `the result of step "draft"`, `the complete transition with the result of step "notify"`. */
  what: string;
}

/** What happened at one crash point. */
export interface CrashPointResult extends CrashPoint {
  /** False when the run finished with fewer durable writes than the run without a crash (nothing crashed). */
  reached: boolean;
  /** Steps that had started when the worker died but whose results were not durable. */
  interrupted: string[];
  /** Steps the new worker ran that had run before the crash (each checked to get the same idempotency key). */
  ranAgain: string[];
}

export interface ResumeReport {
  workflow: string;
  /** The run without a crash. */
  baseline: {
    outcome: TaskOutcome;
    /** Step attempts in the order they started, with the key each received. */
    attempts: StepAttempt[];
    /** The task's durable writes, in order: each is two crash points. */
    writes: WriteInfo[];
    /** The task's journal at the end: its calls, by position. */
    calls: JournalCall[];
    /** What `effects()` returned, if given. */
    effects?: unknown;
  };
  /** Every crash point tried, in order: write 1 before, write 1 after, write 2 before, … */
  points: CrashPointResult[];
}

/** Why a check failed. */
export type ResumeFailure =
  /** The task did not finish (it waits for something nothing answers, or ran out of time). */
  | 'not-finished'
  /** The task failed with NON_DETERMINISM. */
  | 'non-determinism'
  /** A step whose result was durable before the crash ran again. */
  | 'durable-step-ran-again'
  /** A step that ran again got another idempotency key than its first attempt. */
  | 'key-changed'
  /** The task made other calls (steps, sleeps, waits) than the run without a crash. */
  | 'calls-differ'
  /** The task's status, output or error differs from the run without a crash. */
  | 'outcome-differs'
  /** What `effects()` returned differs from the run without a crash. */
  | 'effects-differ';

/**
 * The resumed task did not do what the run without a crash did. `point` is the crash point (null:
 * the run without a crash itself failed the check), `reason` the kind of difference, `report` the
 * crash points tried so far, the failing one last (null when the run without a crash failed).
 */
export class ResumeCheckError extends StepwiseError {
  readonly workflow: string;
  readonly point: CrashPoint | null;
  readonly reason: ResumeFailure;
  readonly report: ResumeReport | null;

  constructor(message: string, fields: { workflow: string; point: CrashPoint | null; reason: ResumeFailure; report: ResumeReport | null }) {
    super(ERROR_CODES.RESUME_CHECK_FAILED, message);
    this.name = 'ResumeCheckError';
    this.workflow = fields.workflow;
    this.point = fields.point;
    this.reason = fields.reason;
    this.report = fields.report;
  }
}

/** Whether `e` is a {@link ResumeCheckError} (by its code, which survives another copy of the package). */
export function isResumeCheckError(e: unknown): e is ResumeCheckError {
  return isStepwiseError(e, ERROR_CODES.RESUME_CHECK_FAILED);
}

/** The crash point, for people: `the worker died before write 2 of 3 (the result of step "draft") became durable`. */
export function describePoint(p: CrashPoint): string {
  return p.when === 'before'
    ? `the worker died before write ${p.write} of ${p.of} (${p.what}) became durable`
    : `the worker died right after write ${p.write} of ${p.of} (${p.what}) became durable`;
}
