/**
 * @module errors/replay
 * The current code of a workflow does not replay a task's journal (`engine.drift`, `checkReplay`).
 */
import { StepwiseError, isStepwiseError } from './base.ts';
import { ERROR_CODES } from './codes.ts';

/** Why a replay failed: the code diverged, made a call a finished task did not, ended otherwise, or never reached the journal's end. */
export type ReplayFailure = 'non-determinism' | 'new-call' | 'other-end' | 'not-finished';

/** The current code of a workflow does not replay a task's journal (REPLAY_CHECK_FAILED). */
export class ReplayCheckError extends StepwiseError {
  readonly taskId: string;
  readonly workflow: string;
  readonly reason: ReplayFailure;
  constructor(message: string, fields: { taskId: string; workflow: string; reason: ReplayFailure }) {
    super(ERROR_CODES.REPLAY_CHECK_FAILED, message);
    this.name = 'ReplayCheckError';
    this.taskId = fields.taskId;
    this.workflow = fields.workflow;
    this.reason = fields.reason;
  }
}

/** Whether `e` is a {@link ReplayCheckError} (by its code). */
export function isReplayCheckError(e: unknown): e is ReplayCheckError {
  return isStepwiseError(e, ERROR_CODES.REPLAY_CHECK_FAILED);
}
