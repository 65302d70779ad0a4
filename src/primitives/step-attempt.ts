/**
 * @module primitives/step-attempt
 * Internal: not part of the public API (the package exports only its index modules).
 * Executing a `ctx.step` that has no recorded result: its attempts, each with its own timeout and
 * the run's signal, and the retry loop between them (a short backoff in-process, a long one
 * registered as a wait the task may park on). Before every attempt, every result the code has
 * received is made durable: no side effect goes before them.
 * One attempt (its signal, its timeout, when its result does not count) is in `run/attempt.ts`.
 */
import { optionalMs } from '../duration.ts';
import { coerceError } from '../errors.ts';
import { classifyError, rememberClass, type ErrorClass } from '../failure/classify.ts';
import { validateOutput } from '../failure/validate.ts';
import { backoffMs, resolveRetry, shouldRetry } from '../retry.ts';
import { decodeError, deserializeError, encodeError } from '../serialize.ts';
import { parked } from '../run/activity.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { attempt } from '../run/attempt.ts';
import { attemptOf, stepFailed, stepSucceeded, type StepCall } from './step-call.ts';
import { lateHalt } from '../run/cleanup-scope.ts';
import { fatalOf, throwIfHalted } from '../run/state.ts';
import { exhausted } from './exhausted.ts';
import { holdFor, pauseUntil, type Wait } from '../run/waits.ts';
import { requiredApproval } from '../approvals/guard.ts';
import { askOnExhausted } from './exhausted-ask.ts';
import { parkRequest, recordedAsk } from './step-ask.ts';
import { drawOrWait, reservationWait } from '../rate-limits/step-draw.ts';

/** A wait until the next attempt of a step, with the row that records its attempts so far. */
function retryWait(run: Run, c: StepCall<unknown>, wakeAt: number): Wait {
  return {
    row: journalRow(run, c.seq, c.stepId, 'step', {
      status: 'retrying',
      error: c.lastError ? encodeError(c.lastError) : null,
      attempts: c.attempt,
      startedAt: c.firstStart,
      wakeAt,
    }),
    wakeAt,
    events: [],
    describe: { kind: 'retry', step: c.stepId, attempt: c.attempt + 1, until: wakeAt },
  };
}

/** Takes up what the step's journal row recorded of its attempts; true if it had parked on an exhausted ask. */
function resumeRecorded(run: Run, c: StepCall<unknown>): boolean {
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
  c.firstStart = recorded?.startedAt ?? run.deps.clock.now();
  return asked;
}

/** Runs the step's attempts (resuming a recorded retry) until it succeeds or fails for good. */
export async function executeStep<T>(run: Run, c: StepCall<T>): Promise<T> {
  // `run.deps` is read at each use: a run resumed after a park has the services of its new claim.
  const { clock } = run.deps;
  const { options, recorded } = c;
  const asked = resumeRecorded(run, c as StepCall<unknown>);
  if (recorded?.status === 'retrying' && recorded.wakeAt !== null) {
    const wait = c.reserved ? reservationWait(run, c as StepCall<unknown>, c.reserved) : retryWait(run, c, recorded.wakeAt);
    await pauseUntil(run, recorded.wakeAt, wait, c.activity);
  }
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
      run.refuse();
      c.activity.idle();
      return parked<T>(run);
    }
    if (c.rate) {
      // Drawn on the step's rate limit before each attempt; a full window means a wait first.
      let waited: boolean;
      try {
        waited = await drawOrWait(run, c as StepCall<unknown>);
      } catch (raw) {
        c.attempt++;
        const next = await attemptFailed(run, c, raw);
        if (next === AGAIN) continue;
        return next.done;
      }
      if (waited) continue;
    }
    c.attempt++;
    c.started = clock.now();
    if (run.deps.hears('step:started')) run.deps.emit('step:started', attemptOf(run, c));
    let value: T;
    if (c.undoable) run.trackUndoable(c.stepId);
    try {
      value = await attempt(run, c);
      if (options.output) value = (await validateOutput(options.output, value, c.stepId)) as T;
    } catch (raw) {
      if (c.undoable) run.settledUndoable(c.stepId);
      const next = await attemptFailed(run, c, raw);
      if (next === AGAIN) continue;
      return next.done;
    }
    // An undoable step stays tracked until the code receives its output and registers its
    // compensation (see `step.ts`).
    return stepSucceeded(run, c, value);
  }
}

/** What {@link attemptFailed} answers when the step makes another attempt. */
const AGAIN = Symbol('again');

/**
 * After a failed attempt: throws what stops the step (a halt, the cleanup, a failed run), or waits
 * out the backoff (or a person) and answers {@link AGAIN}, or answers the step's end (`done`) when
 * its attempts ran out.
 */
async function attemptFailed<T>(run: Run, c: StepCall<T>, raw: unknown): Promise<{ done: Promise<T> } | typeof AGAIN> {
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
    return AGAIN;
  }
  const error = coerceError(raw);
  const cls = classify(run, c, raw);
  rememberClass(error, cls);
  const repair = cls.kind === 'repair';
  // Repairs have their own budget: the retry policy counts only the other attempts.
  if (c.base) cls.retriedAfter = c.base;
  if (repair ? c.repairs >= c.repairBudget : !shouldRetry(c.policy, error, c.attempt - c.repairs - c.base, cls)) {
    if (c.options.onExhausted !== 'ask') return { done: exhausted(run, c, error, stepFailed) };
    const next = await askOnExhausted(run, c, error, false);
    return next.retry ? AGAIN : next;
  }
  if (repair) {
    c.repairs++;
    cls.repairsUsed = c.repairs;
  } else if (c.repairs) cls.repairsUsed = c.repairs;
  c.lastOutput = repair ? (error as { output?: unknown }).output : undefined;
  // A repair runs again at once (the fix is in the feedback, not in waiting).
  const delayMs = repair ? 0 : backoffMs(c.policy, c.attempt - c.repairs - c.base, cls.retryAfterMs === undefined ? error : { retryAfterMs: cls.retryAfterMs });
  const { clock, emit, parkAfterMs } = run.deps;
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
  return AGAIN;
}

/** The engine's class of the attempt's error; a `classify` hook that answers nonsense fails the run. */
function classify(run: Run, c: StepCall<unknown>, raw: unknown): ErrorClass {
  try {
    return classifyError(raw, c.options.classify, run.deps.clock.now());
  } catch (e) {
    throw run.fail(coerceError(e));
  }
}
