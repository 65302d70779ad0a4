/**
 * @module primitives/step
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.step(name, fn, options)`: a recorded result is handed back in replay; otherwise the step is
 * executed (see `step-attempt.ts`) and its output or failure recorded as the code receives it.
 */
import { InvalidArgumentError, StepFailedError } from '../errors.ts';
import { decodeError, decodeJson, deserializeError } from '../serialize.ts';
import { STEP_OPTION_NAMES, type StepContext, type StepOptions } from '../api/step.ts';
import { checkCallOptions } from './call-options.ts';
import type { Activity } from '../run/activity.ts';
import { call, type Primitive } from '../run/call.ts';
import type { Run } from '../run/run.ts';
import { checkFailureOptions, repairBudget } from './exhausted.ts';
import { executeStep } from './step-attempt.ts';
import type { StepCall } from './step-call.ts';
import { businessKey, keyedStep } from '../idempotency/step-key.ts';
import { atMostOnceStep } from '../idempotency/at-most-once.ts';
import { COMPENSATE, inScope, lateHalt } from '../run/cleanup-scope.ts';
import { redoSuffix } from '../run/redo.ts';
import { engineKey } from '../idempotency/keys.ts';
import { recordedReservation, stepRateOf } from '../rate-limits/step-draw.ts';

type StepFn = (s: StepContext) => PromiseLike<unknown> | unknown;

const STEP: Primitive<StepFn, StepOptions | undefined, StepCall<unknown>, unknown> = {
  kind: 'step',
  replayed(rec, stepId) {
    if (rec.status === 'completed') return decodeJson(rec.output);
    throw new StepFailedError(stepId, rec.attempts, deserializeError(decodeError(rec.error as string)));
  },
  prepare(run, pos, fn, options = {}) {
    if (typeof fn !== 'function') throw run.fail(new InvalidArgumentError(`ctx.step("${pos.name}"): the second argument must be a function`));
    checkCallOptions(run, options, STEP_OPTION_NAMES, `ctx.step("${pos.name}")`);
    if (options.effect !== undefined && options.effect !== 'at-least-once' && options.effect !== 'at-most-once') {
      throw run.fail(new InvalidArgumentError(`ctx.step("${pos.name}"): effect must be 'at-least-once' or 'at-most-once', got ${JSON.stringify(options.effect)}.`));
    }
    if (options.effect === 'at-most-once' && options.key !== undefined) {
      throw run.fail(new InvalidArgumentError(`ctx.step("${pos.name}"): an at-most-once step cannot also have a business key (its intent belongs to its task).`));
    }
    const bad = checkFailureOptions(pos.stepId, options);
    if (bad) throw run.fail(bad);
    const business = options.key === undefined ? null : businessKey(run, pos.stepId, options);
    if (business !== null) run.keyCall(pos.seq, business);
    return {
      seq: pos.seq,
      stepId: pos.stepId,
      fn,
      options,
      recorded: pos.recorded,
      activity: null as unknown as Activity,
      idempotencyKey: (business ?? engineKey(run.taskId, pos.name, pos.occurrence)) + redoSuffix(run.task.redo, pos.stepId),
      attempt: 0,
      lastError: undefined,
      lastOutput: undefined,
      repairs: 0,
      repairBudget: repairBudget(options),
      inCleanup: lateHalt(run.cleanup) !== null,
      undoable: typeof options.compensate === 'function' && !inScope(run.cleanup),
      firstStart: 0,
      started: 0,
      timeoutMs: undefined,
      policy: run.defaultRetry,
      base: 0,
      rate: options.rateLimit === undefined ? null : stepRateOf(run, pos.stepId, options.rateLimit),
      reserved: options.rateLimit === undefined ? undefined : recordedReservation(pos.recorded),
    };
  },
  start(run, c, activity) {
    c.activity = activity;
    if (c.options.effect === 'at-most-once') return atMostOnceStep(run, c);
    return c.options.key === undefined ? executeStep(run, c) : keyedStep(run, c);
  },
};

export function step<T>(run: Run, name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions): Promise<T> {
  const p = call(run, STEP, name, fn, options) as Promise<T>;
  const compensate = options?.compensate;
  if (!compensate) return p;
  if (typeof compensate !== 'function') return Promise.reject(run.fail(new InvalidArgumentError(`ctx.step("${name}"): compensate must be a function of the step's output`)));
  // The cleanup's own steps are not compensated.
  if (inScope(run.cleanup)) return p;
  // The occurrence this call took (its position was taken synchronously by `call`).
  const occurrence = run.occurrence(name);
  const stepId = occurrence === 1 ? name : `${name}#${occurrence}`;
  // Registered when the code receives the output, in that order (replayed results too). A step
  // executed in this run is tracked as undoable until then (see `run/cleanup.ts`): the cleanup
  // waits for it, and finds its compensation registered.
  return p.then(
    (output) => {
      const undo: Undo = { name, occurrence, output, fn: compensate, retry: options.retry };
      run.registerCompensation({ stepId, undo: () => compensationStep(run, undo) });
      run.settledUndoable(stepId);
      return output;
    },
    (e: unknown) => {
      run.settledUndoable(stepId);
      throw e;
    },
  );
}

/** A completed step's compensation: the step, its output, and the function that undoes it. */
interface Undo {
  name: string;
  occurrence: number;
  output: unknown;
  fn: (output: unknown, s: StepContext) => unknown;
  retry: StepOptions['retry'];
}

/** The compensation `c` as a step of the cleanup scope: `compensate:<step>`, with the occurrence of the step it undoes. */
function compensationStep(run: Run, c: Undo): Promise<unknown> {
  return call(run, STEP, `${COMPENSATE}${c.name}`, (s: StepContext) => c.fn(c.output, s), c.retry === undefined ? {} : { retry: c.retry }, c.occurrence);
}
