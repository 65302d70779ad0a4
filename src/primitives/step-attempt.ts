/**
 * @module primitives/step-attempt
 * Internal: not part of the public API (the package exports only its index modules).
 * Executing a `ctx.step` that has no recorded result: its attempts, each with its own timeout and
 * the run's signal, and the retry loop between them (a short backoff in-process, a long one
 * registered as a wait the task may park on). Before every attempt, every result the code has
 * received is made durable: no side effect goes before them.
 * One attempt (its signal, its timeout, when its result does not count) is in `attempt.ts`.
 */
import { optionalMs } from '../duration.ts';
import { StepFailedError, coerceError, type NotSerializableError } from '../errors.ts';
import { classifyError, rememberClass, type ErrorClass } from '../failure/classify.ts';
import { validateOutput } from '../failure/validate.ts';
import { backoffMs, resolveRetry, shouldRetry, type RetryPolicy } from '../retry.ts';
import { decodeError, deserializeError, encodeError, encodeJson } from '../serialize.ts';
import { checkSize } from '../limits.ts';
import type { StepRow } from '../store.ts';
import type { StepContext, StepOptions } from '../api/step.ts';
import { parked, type Activity } from '../run/activity.ts';
import type { RunCore } from '../run/core.ts';
import { journalRow } from '../run/identity.ts';
import { attempt, type AttemptCall } from '../run/attempt.ts';
import { lateHalt } from '../run/cleanup-scope.ts';
import { fatalOf, throwIfHalted } from '../run/state.ts';
import { exhausted } from './exhausted.ts';
import { holdFor, pauseUntil, type Wait } from '../run/waits.ts';
import { requiredApproval } from '../approvals/guard.ts';
import { askOnExhausted } from './exhausted-ask.ts';
import { parkRequest, recordedAsk } from './step-ask.ts';

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
  /** Called in the cleanup scope (see `cleanup.ts`): a step from before it may not finish in it. */
  inCleanup: boolean;
  /** A step of the code with a compensation: tracked in `run.undoable` while an attempt runs (see `cleanup.ts`). */
  undoable: boolean;
  firstStart: number;
  /** When the current attempt started. */
  started: number;
  timeoutMs: number | undefined;
  policy: RetryPolicy;
  /** Attempts made before a person's `retry` decision (see `exhausted-ask.ts`): not counted by `policy`. */
  base: number;
}

/** A wait until the next attempt of a step, with the row that records its attempts so far. */
function retryWait(run: RunCore, c: StepCall<unknown>, wakeAt: number): Wait {
  return {
    row: journalRow(run, c.seq, c.stepId, 'step', {
      status: 'retrying', error: c.lastError ? encodeError(c.lastError) : null, attempts: c.attempt, startedAt: c.firstStart, wakeAt,
    }),
    wakeAt,
    events: [],
    describe: { kind: 'retry', step: c.stepId, attempt: c.attempt + 1, until: wakeAt },
  };
}

/** Runs the step's attempts (resuming a recorded retry) until it succeeds or fails for good. */
export async function executeStep<T>(run: RunCore, c: StepCall<T>): Promise<T> {
  const { clock, emit, hears, parkAfterMs } = run.deps;
  const { options, recorded } = c;
  // A step parked on a person's decision when its attempts ran out (`onExhausted: 'ask'`).
  const asked = recordedAsk(recorded)?.ask === 'exhausted' && options.onExhausted === 'ask';
  if (options.retry !== undefined) c.policy = resolveRetry(options.retry, run.defaultRetry);
  if (options.timeout !== undefined) c.timeoutMs = optionalMs(options.timeout, `timeout of step "${c.stepId}"`);
  if (recorded) {
    if (recorded.status === 'retrying' || asked) c.attempt = recorded.attempts;
    if (recorded.error) {
      const stored = decodeError(recorded.error);
      c.lastError = deserializeError(stored);
      if (recorded.status === 'retrying' || asked) {
        c.repairs = stored.class?.repairsUsed ?? 0;
        c.base = stored.class?.retriedAfter ?? 0;
      }
      c.lastOutput = stored.class?.kind === 'repair' ? stored.data?.output : undefined;
    }
  }
  c.firstStart = recorded?.startedAt ?? clock.now();
  if (recorded?.status === 'retrying' && recorded.wakeAt !== null) await pauseUntil(run, recorded.wakeAt, retryWait(run, c, recorded.wakeAt), c.activity);
  if (asked && c.lastError) {
    const next = await askOnExhausted(run, c, c.lastError, true);
    if (!next.retry) return next.done;
  }
  if (options.requires !== undefined && c.attempt === 0) {
    // The guard reads the task's approval records, whatever path the code took to get here.
    await run.writer.flush();
    const refusal = await requiredApproval(run, c.stepId, options.requires);
    if (refusal) return stepFailed(run, c, refusal);
  }
  for (;;) {
    // No side effect before every result the code has received is durable.
    await run.writer.flush();
    throwIfHalted(run.state);
    // A step of the code starts no new attempt once the cleanup scope has begun.
    const late = lateHalt(run.cleanup);
    if (late && !c.inCleanup) throw late;
    if (run.blocked()) {
      // Paused or draining: this attempt does not start in this run (a retry keeps its count).
      if (c.attempt > 0) return holdFor(run, retryWait(run, c, clock.now()), c.activity);
      run.refused++;
      c.activity.idle();
      return parked<T>(run);
    }
    c.attempt++;
    c.started = clock.now();
    if (hears('step:started')) emit('step:started', attemptOf(run, c));
    let value: T;
    if (c.undoable) run.undoable.add(c.stepId);
    try {
      value = await attempt(run, c);
      if (options.output) value = (await validateOutput(options.output, value, c.stepId)) as T;
    } catch (raw) {
      if (c.undoable) run.settledUndoable(c.stepId);
      throwIfHalted(run.state);
      // A step of the code that was stopped, failing during the cleanup scope: not retried.
      const late = lateHalt(run.cleanup);
      if (late && !c.inCleanup) throw late;
      // The run failed meanwhile (its deadline passed): the attempt's failure is not retried.
      const fatal = fatalOf(run.state);
      if (fatal) throw fatal;
      if (run.ended) throw raw; // a step left running when the run ended: nothing to record
      const park = parkRequest(raw);
      if (park) {
        // The attempt asked to wait for a person (see `step-ask.ts`): it does not count.
        await park(run, c as StepCall<unknown>);
        c.attempt--;
        continue;
      }
      const error = coerceError(raw);
      const cls = classify(run, c, raw);
      rememberClass(error, cls);
      const repair = cls.kind === 'repair';
      // Repairs have their own budget: the retry policy counts only the other attempts.
      if (c.base) cls.retriedAfter = c.base;
      if (repair ? c.repairs >= c.repairBudget : !shouldRetry(c.policy, error, c.attempt - c.repairs - c.base, cls)) {
        if (options.onExhausted !== 'ask') return exhausted(run, c, error, stepFailed);
        const next = await askOnExhausted(run, c, error, false);
        if (next.retry) continue;
        return next.done;
      }
      if (repair) {
        c.repairs++;
        cls.repairsUsed = c.repairs;
      } else if (c.repairs) cls.repairsUsed = c.repairs;
      c.lastOutput = repair ? (error as { output?: unknown }).output : undefined;
      // A repair runs again at once (the fix is in the feedback, not in waiting).
      const delayMs = repair ? 0 : backoffMs(c.policy, c.attempt - c.repairs - c.base, cls.retryAfterMs === undefined ? error : { retryAfterMs: cls.retryAfterMs });
      const wakeAt = clock.now() + delayMs;
      emit('step:retrying', { ...attemptOf(run, c), delayMs, error, parked: delayMs > parkAfterMs });
      c.lastError = error;
      const wait = retryWait(run, c, wakeAt);
      // Each failed attempt is recorded (its error, the attempt count, when the next one is due):
      // a crash during the backoff resumes the count, and the log shows every attempt. A wait long
      // enough to park writes the row with the park instead. Failures only: no cost on success.
      if (delayMs <= parkAfterMs) {
        await run.writer.flush();
        await run.writer.checkpoint(wait.row);
      }
      await pauseUntil(run, wakeAt, wait, c.activity);
      continue;
    }
    const done = stepSucceeded(run, c, value);
    if (c.undoable) {
      // Tracked until the code receives the output (which registers the compensation).
      const untrack = (): void => run.settledUndoable(c.stepId);
      done.then(untrack, untrack);
    }
    return done;
  }
}

/** What every step event says of the attempt: task, step, the key it received, its number. */
export function attemptOf(run: RunCore, c: Pick<StepCall<unknown>, 'stepId' | 'idempotencyKey' | 'attempt'>): { taskId: string; step: string; idempotencyKey: string; attempt: number } {
  return { taskId: run.taskId, step: c.stepId, idempotencyKey: c.idempotencyKey, attempt: c.attempt };
}

/** The engine's class of the attempt's error; a `classify` hook that answers nonsense fails the run. */
function classify(run: RunCore, c: StepCall<unknown>, raw: unknown): ErrorClass {
  try {
    return classifyError(raw, c.options.classify, run.deps.clock.now());
  } catch (e) {
    throw run.fail(coerceError(e));
  }
}

/** The step failed for good: the code receives a StepFailedError (recorded like any result). */
export function stepFailed<T>(
  run: RunCore,
  c: Pick<StepCall<T>, 'seq' | 'stepId' | 'attempt' | 'firstStart' | 'idempotencyKey'>,
  error: Error,
  consume?: { signalId: number; seq: number },
): Promise<T> {
  run.deps.emit('step:failed', { ...attemptOf(run, c), error });
  const failed = journalRow(run, c.seq, c.stepId, 'step', {
    status: 'failed', error: encodeError(error), attempts: c.attempt, startedAt: c.firstStart, finishedAt: run.deps.clock.now(),
  });
  const attempts = c.attempt;
  return run.writer.complete(failed, () => {
    throw new StepFailedError(c.stepId, attempts, error);
  }, consume);
}

/** Records the step's output (handed back as its JSON copy, as a replay would). */
function stepSucceeded<T>(run: RunCore, c: StepCall<T>, value: T): Promise<T> {
  let output: string | null;
  try {
    output = encodeJson(value, () => `The output of step "${c.stepId}"`);
    checkSize(output, run.deps.outputBytes, () => `The output of step "${c.stepId}"`, 'outputBytes');
  } catch (e) {
    return stepFailed(run, c, e as NotSerializableError);
  }
  const finishedAt = run.deps.clock.now();
  const row = journalRow(run, c.seq, c.stepId, 'step', { output, attempts: c.attempt, startedAt: c.firstStart, finishedAt });
  const attempt = c.attempt;
  const { emit, hears } = run.deps;
  return run.writer.complete(
    row,
    () => (output === null ? undefined : JSON.parse(output)) as T,
    undefined,
    // Reported once the result is durable (a step reported completed never runs again).
    () => {
      if (hears('step:completed')) emit('step:completed', { taskId: run.taskId, step: c.stepId, idempotencyKey: c.idempotencyKey, attempt, durationMs: finishedAt - c.started });
    },
  );
}
