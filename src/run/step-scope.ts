/**
 * @module run/step-scope
 * Internal: not part of the public API (the package exports only its index modules).
 * Which step's function is running, as the async context of that function's code: a durable call
 * made from inside it (directly, or through a helper that takes `ctx`) sees the enclosing step,
 * while calls running beside it (`Promise.all` of two steps in the workflow code) do not.
 *
 * An enabled async context costs every promise and every native callback of the process a hook,
 * so it is enabled only while a step function of this process is in flight: from its call until
 * the promise it returned settles (a synchronous function: until it returns). A call made after
 * its own step settled is not inside that step any more, and a context that nothing reads need
 * not be carried.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface Enclosing {
  readonly run: object;
  readonly stepId: string;
}

const scope = new AsyncLocalStorage<Enclosing>();
/** Step functions in flight in this process (the async context is enabled while there are any). */
let inFlight = 0;
/**
 * A promise made inside the context, kept for the life of the process. An enabled context gives
 * every promise an async id and the context's slot, so promises made while it is enabled share one
 * hidden class, which the optimised code of Node's promise hooks is specialised for; this promise
 * keeps that class alive through a worker's idle spells (see `run/warm-shapes.ts`).
 */
let keptPromise: Promise<void> | null = null;

function keepPromiseClass(): void {
  // Its context names no run (the scope itself stands in), so no call ever sees it as enclosing.
  keptPromise = scope.run({ run: scope, stepId: '' }, () => Promise.resolve());
}

/**
 * Calls a step's function `fn(arg)` of `run` as the code of step `stepId`. A function that throws
 * has left the step when this throws; otherwise the caller calls {@link stepSettled} once the
 * result has settled (at once for a value that is not a thenable).
 */
export function runAsStep<A, T>(run: object, stepId: string, fn: (arg: A) => T, arg: A): T {
  inFlight++;
  if (keptPromise === null) keepPromiseClass();
  try {
    return scope.run({ run, stepId }, fn, arg);
  } catch (e) {
    stepSettled();
    throw e;
  }
}

/** A step function's result has settled (see {@link runAsStep}). */
export function stepSettled(): void {
  if (--inFlight === 0) scope.disable();
}

/** The step of `run` whose function is making the current call, or null (the workflow code's own call). */
export function enclosingStep(run: object): string | null {
  const s = scope.getStore();
  return s !== undefined && s.run === run ? s.stepId : null;
}
