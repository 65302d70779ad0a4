/**
 * @module primitives/step-call
 * Internal: not part of the public API (the package exports only its index modules).
 * One `ctx.step` call being executed (its identity and its attempts so far), and how its end is
 * recorded: its output, or its failure for good, checkpointed as the code receives it.
 */
import { StepFailedError, type NotSerializableError } from '../errors.ts';
import { encodeError } from '../serialize.ts';
import { encodeWithin } from '../limits.ts';
import type { RateDraw, StepRow } from '../store.ts';
import type { StepRate } from '../rate-limits/config.ts';
import type { StepOptions } from '../api/step.ts';
import type { RetryPolicy } from '../retry.ts';
import type { Activity } from '../run/activity.ts';
import type { AttemptCall } from '../run/attempt.ts';
import type { StepContext } from '../api/step.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';

/** One `ctx.step` call being executed: its identity and its attempts so far. */
export interface StepCall<T> extends AttemptCall<T> {
  seq: number;
  stepId: string;
  fn: (s: StepContext) => PromiseLike<T> | T;
  options: StepOptions;
  recorded: StepRow | undefined;
  activity: Activity;
  idempotencyKey: string;
  attempt: number;
  lastError: Error | undefined;
  /** The refused output of the previous attempt (a repair error's `output`). */
  lastOutput: unknown;
  /** Attempts that ended in a repair error so far (they do not count against `policy`). */
  repairs: number;
  /** Repair attempts allowed (`options.repair`). */
  repairBudget: number;
  /** Called in the cleanup scope (see `run/cleanup.ts`): a step from before it may not finish in it. */
  inCleanup: boolean;
  /**
   * A step of the code with a compensation: tracked (`run.trackUndoable`) from the start of an
   * attempt until the code receives its output and registers the compensation (see `run/cleanup.ts`).
   * `step()` untracks it then, by the id it computes as `identity.ts` does: a call with `undoable`
   * set is made only through `step()`; a failure decided here untracks it at once.
   */
  undoable: boolean;
  firstStart: number;
  /** When the current attempt started. */
  started: number;
  timeoutMs: number | undefined;
  policy: RetryPolicy;
  /** Attempts made before a person's `retry` decision (see `exhausted-ask.ts`): not counted by `policy`. */
  base: number;
  /** What each attempt draws on the engine's rate limit (`rateLimit` option), or null. */
  rate: StepRate | null;
  /** A draw placed ahead of time that the next attempt uses (see `rate-limits/step-draw.ts`). */
  reserved: RateDraw | undefined;
}

/** What every step event says of the attempt: task, step, the key it received, its number. */
export function attemptOf(run: Run, c: Pick<StepCall<unknown>, 'stepId' | 'idempotencyKey' | 'attempt'>): { taskId: string; step: string; idempotencyKey: string; attempt: number } {
  return { taskId: run.taskId, step: c.stepId, idempotencyKey: c.idempotencyKey, attempt: c.attempt };
}

/** The step failed for good: the code receives a StepFailedError (recorded like any result). */
export function stepFailed<T>(
  run: Run,
  c: Pick<StepCall<T>, 'seq' | 'stepId' | 'attempt' | 'firstStart' | 'idempotencyKey'>,
  error: Error,
  consume?: { signalId: number; seq: number },
): Promise<T> {
  run.deps.emit('step:failed', { ...attemptOf(run, c), error });
  const failed = journalRow(run, c.seq, c.stepId, 'step', {
    status: 'failed',
    error: encodeError(error),
    attempts: c.attempt,
    startedAt: c.firstStart,
    finishedAt: run.deps.clock.now(),
  });
  const attempts = c.attempt;
  return run.writer.complete(
    failed,
    () => {
      throw new StepFailedError(c.stepId, attempts, error);
    },
    consume,
  );
}

/** Records the step's output (handed back as its JSON copy, as a replay would). */
export function stepSucceeded<T>(run: Run, c: StepCall<T>, value: T): Promise<T> {
  let output: string | null;
  try {
    output = encodeWithin(value, () => `The output of step "${c.stepId}"`, run.deps.outputBytes, 'outputBytes');
  } catch (e) {
    // No output to undo: untracked now, not once a keyed step's store has heard of the failure.
    if (c.undoable) run.settledUndoable(c.stepId);
    return stepFailed(run, c, e as NotSerializableError);
  }
  const finishedAt = run.deps.clock.now();
  const row = journalRow(run, c.seq, c.stepId, 'step', { output, attempts: c.attempt, startedAt: c.firstStart, finishedAt });
  const attempt = c.attempt;
  // Functions of the module bound to this step's values, not closures made per step (see resolvers.ts).
  return run.writer.complete(
    row,
    parsedOutput.bind(null, output) as () => T,
    undefined,
    // Reported once the result is durable (a step reported completed never runs again).
    reportCompleted.bind(null, run, c as StepCall<unknown>, attempt, finishedAt),
  );
}

/** What the code receives of a step's output: its JSON copy, as a replay would hand it back. */
function parsedOutput(output: string | null): unknown {
  return output === null ? undefined : JSON.parse(output);
}

function reportCompleted(run: Run, c: StepCall<unknown>, attempt: number, finishedAt: number): void {
  if (run.deps.hears('step:completed'))
    run.deps.emit('step:completed', { taskId: run.taskId, step: c.stepId, idempotencyKey: c.idempotencyKey, attempt, durationMs: finishedAt - c.started });
}
