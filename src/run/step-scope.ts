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
 *
 * Turning the context on and off costs about 2 KB of garbage and a microsecond or two, which a
 * synchronous step (`() => value`) paid twice per call. So a plain (not `async`) function is
 * called with a marker instead, set for the length of the call, when every earlier call of its
 * step name in its workflow returned a value that is not a thenable. An `async` function, a name
 * not seen yet, and a name whose plain function has ever returned a thenable (for good) are called
 * in the context, whose continuations carry it. The one call the marker misses, once per
 * workflow and name in a process: the first time such a function returns a promise, a durable
 * call made in that promise's continuations.
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

/** The step whose function is being called with the marker (see the module's note), or null. */
let marked: Enclosing | null = null;

const AsyncFunction = (async () => undefined).constructor;

/**
 * Per workflow (its definition object), what the plain functions of each step name (a step id
 * without its `#n`) returned: true while every call returned a value that is not a thenable, false
 * for good once one returned a thenable. Per workflow, because two workflows may call different
 * functions by one name. Bounded, so that generated names cannot grow it without end (a name left
 * out is called in the context: slower, never wrong).
 */
const plainNames = new WeakMap<object, Map<string, boolean>>();
const PLAIN_NAMES_MAX = 4096;

function nameOf(stepId: string): string {
  const hash = stepId.indexOf('#');
  return hash < 0 ? stepId : stepId.slice(0, hash);
}

function isThenable(value: unknown): boolean {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/** Whether the last {@link runAsStep} call left the async context held for its result. */
let held = false;

/**
 * Calls a step's function `fn(arg)` of `run` (of `workflow`) as the code of step `stepId`. If the
 * context is held for its result (a thenable: see {@link heldForResult}), the caller calls
 * {@link stepSettled} once it has settled. A function that throws has left the step when this throws.
 */
export function runAsStep<A, T>(run: object, workflow: object, stepId: string, fn: (arg: A) => T, arg: A): T {
  held = false;
  const plain = !(fn instanceof AsyncFunction);
  const name = plain ? nameOf(stepId) : '';
  let names: Map<string, boolean> | undefined;
  if (plain) {
    names = plainNames.get(workflow);
    if (names === undefined) plainNames.set(workflow, (names = new Map()));
    if (names.get(name) === true) {
      const outer = marked;
      marked = { run, stepId };
      let result: T;
      try {
        result = fn(arg);
      } finally {
        marked = outer;
      }
      // The function may have started another run's step, which set the flag.
      held = false;
      if (isThenable(result)) names.set(name, false);
      return result;
    }
  }
  inFlight++;
  if (keptPromise === null) keepPromiseClass();
  let result: T;
  try {
    result = scope.run({ run, stepId }, fn, arg);
  } catch (e) {
    stepSettled();
    throw e;
  }
  const thenable = isThenable(result);
  if (names !== undefined && (names.has(name) || names.size < PLAIN_NAMES_MAX)) {
    // A name recorded false (it returned a thenable) stays false.
    if (thenable) names.set(name, false);
    else if (!names.has(name)) names.set(name, true);
  }
  if (thenable) {
    held = true;
    return result;
  }
  stepSettled();
  held = false;
  return result;
}

/** Whether the context is held for the result the last {@link runAsStep} call returned (read at once after it). */
export function heldForResult(): boolean {
  return held;
}

/** A step function's result, called in the async context, has settled (see {@link runAsStep}). */
export function stepSettled(): void {
  if (--inFlight === 0) scope.disable();
}

/** The step of `run` whose function is making the current call, or null (the workflow code's own call). */
export function enclosingStep(run: object): string | null {
  if (marked !== null && marked.run === run) return marked.stepId;
  const s = scope.getStore();
  return s !== undefined && s.run === run ? s.stepId : null;
}
