/**
 * @module run/attempt
 * Internal: not part of the public API (the package exports only its index modules).
 * One attempt of a step (the retry loop around it is `primitives/step-attempt.ts`): the step's function
 * called with its context, under the run's AbortSignal, or its own one when it has a timeout.
 *
 * A cancel, or the end of the worker's grace period, fires the AbortSignal and new calls reject.
 * An attempt whose signal fired is interrupted, whatever its function returns afterwards: what it
 * returns may be cut short (the AI SDK's `streamText` ends its text stream quietly on abort, so a
 * step collecting it would return a truncated answer as if finished), so it is never checkpointed
 * as completed; the step runs again in a later run, or the task ends cancelled. The exception is a
 * step with a compensation whose task ends with its cleanup (see {@link undoneLater}): its effect
 * may have happened, so its result is checkpointed and compensated. A step gets the grace period
 * to settle (to stop its side effect cleanly); a timeout or a lost lease ends the attempt at once.
 */
import { newest } from './warm-shapes.ts';
import { StepTimeoutError } from '../errors.ts';
import type { Progress, StepContext } from '../api/step.ts';
import type { RateLimitTicket } from '../api/rate-limits.ts';
import { lateHalt } from './cleanup-scope.ts';
import { heldForResult, runAsStep, stepSettled } from './step-scope.ts';
import { coreOf, type RunCore } from './core.ts';
import type { Run } from './run.ts';
import { haltOf, mayWrite } from './state.ts';
import { withResolvers } from '../resolvers.ts';
import { removeItem } from '../small-lists.ts';

/**
 * What one attempt needs of its step call: the function, its context's fields, its own timeout,
 * and how its result counts (a primitive's record of a call extends it).
 */
export interface AttemptCall<T> {
  stepId: string;
  fn: (s: StepContext) => PromiseLike<T> | T;
  idempotencyKey: string;
  /** 1 for the first attempt. */
  attempt: number;
  lastError: Error | undefined;
  lastOutput: unknown;
  timeoutMs: number | undefined;
  /** Called in the cleanup scope: its result counts after the code has stopped. */
  inCleanup: boolean;
  /** A step of the code with a compensation (see {@link undoneLater}). */
  undoable: boolean;
  /** The draw of this attempt on the step's rate limit (see `rate-limits/`), if it has one. */
  ticket?: RateLimitTicket | undefined;
}

/** A promise or any other thenable (a query builder, a promise from another realm). */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * Whether the value a step returned after its signal fired (`why`) counts all the same: a step of
 * the code with a compensation, stopped by what ends the task with its cleanup (a cancel, the task's
 * deadline, the cleanup's deadline while it waits for the step), before the cleanup has begun. Its
 * effect may have happened; recorded, it is compensated (only the compensation and the code's last
 * moments see the output: the code's next calls are refused). A worker's grace period or a lost
 * lease does not count it (the task runs again), nor the step's own timeout.
 */
function undoneLater(run: RunCore, c: AttemptCall<unknown>, why: unknown): boolean {
  if (!c.undoable || lateHalt(run.cleanup) !== null || why !== run.abortReason || !run.aborted) return false;
  const kind = run.state.kind;
  return kind === 'cancelled' || kind === 'failed' || (kind === 'running' && run.cleanup.kind === 'stopped');
}

/** One attempt: resolves with the step's value, rejects with its error, its timeout or the halt reason. */
export function attempt<T>(view: Run, c: AttemptCall<T>): Promise<T> {
  const run = coreOf(view);
  // A dead worker (TaskRun.abandon: the crash simulation of stepwise-engine/testing) starts nothing.
  if (run.abandoned) return new Promise<T>(() => undefined);
  if (run.aborted) return Promise.reject(run.abortReason);
  return new Attempt(run, c).promise;
}

/** What the run calls on the attempts in progress without a timeout when it aborts (`RunCore.abortRun`). */
interface AbortHandler {
  handleEvent(): void;
}

/**
 * One attempt in progress: its promise, how it settles, and its abort handler. The object is its
 * own handler (`handleEvent`, the form an EventTarget listener object takes), so an attempt
 * allocates no closure of its own: the step path is hot.
 */
class Attempt<T> implements AbortHandler {
  readonly promise: Promise<T>;
  readonly #run: RunCore;
  readonly #c: AttemptCall<T>;
  /** With a timeout, the step's own signal (the run's or the timeout's); without, none: the run's. */
  readonly #own: AbortSignal | undefined;
  readonly #timerStop: AbortController | undefined;
  readonly #ok: (v: T) => void;
  readonly #fail: (e: unknown) => void;
  #done = false;

  constructor(run: RunCore, c: AttemptCall<T>) {
    this.#run = run;
    this.#c = c;
    const timeoutMs = c.timeoutMs;
    const timeout = timeoutMs === undefined ? undefined : new AbortController();
    const own = timeout ? AbortSignal.any([run.signal, timeout.signal]) : undefined;
    const timerStop = timeout ? new AbortController() : undefined;
    this.#own = own;
    this.#timerStop = timerStop;
    const ctx = new AttemptContext(run, c, own);
    ({ promise: this.promise, resolve: this.#ok, reject: this.#fail } = withResolvers<T>());
    // Without a timeout the run calls the attempt's handler when it aborts (once), which costs
    // far less than an EventTarget listener per attempt.
    if (own) {
      run.timedAttempts++;
      own.addEventListener('abort', this, { once: true });
    } else run.attemptAborts.push(this);
    if (timeout && timerStop && timeoutMs !== undefined) {
      run.deps.clock.sleep(timeoutMs, timerStop.signal).then(
        () => timeout.abort(new StepTimeoutError(c.stepId, timeoutMs)),
        () => undefined,
      );
    }
    newest.attempt = this;
    newest.stepContext = ctx;
    callStep(run, c.stepId, c.fn, ctx, this);
  }

  // Nor does a running step's end reach the code of a dead worker (see above).
  #resolve(v: T): void {
    if (!this.#run.abandoned) this.#ok(v);
  }

  #reject(e: unknown): void {
    if (!this.#run.abandoned) this.#fail(e);
  }

  #cleanup(): void {
    if (this.#done) return;
    this.#done = true;
    const own = this.#own;
    if (own) {
      own.removeEventListener('abort', this);
      this.#run.timedAttempts--;
    } else removeItem(this.#run.attemptAborts, this);
    this.#timerStop?.abort(null);
  }

  /** Why the attempt was told to stop, if it was: then its result does not count. */
  #interrupted(): unknown {
    const run = this.#run;
    const own = this.#own;
    return own?.aborted ? own.reason : run.aborted ? run.abortReason : this.#c.inCleanup ? undefined : (lateHalt(run.cleanup) ?? undefined);
  }

  /** The step function's value. */
  settle(v: T): void {
    this.#cleanup();
    const why = this.#interrupted();
    if (why === undefined || undoneLater(this.#run, this.#c, why)) this.#resolve(v);
    else this.#reject(why);
  }

  /** The step function's failure (thrown or rejected). */
  failed(e: unknown): void {
    this.#cleanup();
    this.#reject(e);
  }

  /**
   * The step was told to stop. If it was cancelled or its worker is stopping, the lease is still
   * ours: give it the grace period to settle (its result does not count: see above). A timeout or
   * a lost lease ends the attempt at once.
   */
  handleEvent(): void {
    const run = this.#run;
    const reason: unknown = this.#own ? this.#own.reason : run.abortReason;
    const halt = haltOf(run.state);
    if (halt && reason === halt && mayWrite(run.state)) return;
    this.#cleanup();
    this.#reject(reason);
  }
}

/**
 * What the step function of `c` receives. Its signal is the attempt's own (with a timeout), or the
 * run's, read only when the step asks for it: the run's AbortController is made on first use, and a
 * step that never reads its signal costs the run none. Every field is an own enumerable property
 * (`signal` an accessor), as on a plain object, so that `{ ...s }` keeps them all; built by a
 * constructor with one shared accessor, not as an object literal with a getter, which V8 builds
 * through a slow path, several microseconds a step.
 */
class AttemptContext implements StepContext {
  static readonly #signal: PropertyDescriptor = {
    enumerable: true,
    get(this: AttemptContext): AbortSignal {
      return this.#own ?? this.#run.signal;
    },
  };
  readonly #run: RunCore;
  readonly #own: AbortSignal | undefined;
  declare readonly signal: AbortSignal;
  readonly idempotencyKey: string;
  readonly attempt: number;
  readonly lastError: Error | undefined;
  readonly lastOutput: unknown;
  readonly taskId: string;
  readonly stepName: string;
  readonly epoch: number;
  readonly progress: (p: Progress) => void;
  readonly rateLimit: RateLimitTicket | undefined;

  constructor(run: RunCore, c: AttemptCall<unknown>, own: AbortSignal | undefined) {
    this.#run = run;
    this.#own = own;
    Object.defineProperty(this, 'signal', AttemptContext.#signal);
    this.idempotencyKey = c.idempotencyKey;
    this.attempt = c.attempt;
    this.lastError = c.lastError;
    this.lastOutput = c.lastOutput;
    this.taskId = run.taskId;
    this.stepName = c.stepId;
    this.epoch = run.epoch;
    const stepId = c.stepId;
    this.progress = (p: Progress) => run.progress.report(stepId, p);
    this.rateLimit = c.ticket;
    Object.freeze(this);
  }
}

/** Calls the step function: its value goes to `a.settle`, its failure (thrown or rejected) to `a.failed`. */
function callStep<T>(run: RunCore, stepId: string, fn: (s: StepContext) => PromiseLike<T> | T, ctx: StepContext, a: Attempt<T>): void {
  let result: PromiseLike<T> | T;
  try {
    // As the step's code (its async context, or a marker: see step-scope.ts), so that a durable
    // call made inside it is refused (see identity.ts).
    result = runAsStep(run, run.workflow, stepId, fn, ctx);
  } catch (e) {
    return a.failed(e);
  }
  if (isThenable(result)) {
    const held = heldForResult();
    // Adopted as a real promise: a foreign thenable gets the same one-shot settlement.
    Promise.resolve(result).then(
      (v) => {
        if (held) stepSettled();
        a.settle(v);
      },
      (e: unknown) => {
        if (held) stepSettled();
        a.failed(e);
      },
    );
  } else {
    // A synchronous step: its value is final.
    a.settle(result);
  }
}
