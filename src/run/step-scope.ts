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
 * synchronous step (`() => value`) paid twice per call. A function whose calls need no context is
 * called with a plain marker instead, set for the length of the call: a plain (not `async`)
 * function whose step name already returned a value that is not a thenable in this process. An
 * `async` function, and a plain one whose name is new or returned a thenable, is called in the
 * context (a thenable's continuations are code of the step). The one call the marker misses: a
 * plain function whose name returned a plain value before and now returns a promise whose
 * continuations make a durable call; its name is called in the context from then on.
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
 * Step names (a step id without its `#n`) whose plain function returned a value that is not a
 * thenable, when last called in this process. Bounded, so that generated names cannot grow it
 * without end (a name left out is called in the context: slower, never wrong).
 */
const plainNames = new Set<string>();
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
 * Calls a step's function `fn(arg)` of `run` as the code of step `stepId`. If the context is held
 * for its result (a thenable: see {@link heldForResult}), the caller calls {@link stepSettled}
 * once it has settled. A function that throws has left the step when this throws.
 */
export function runAsStep<A, T>(run: object, stepId: string, fn: (arg: A) => T, arg: A): T {
  held = false;
  const plain = !(fn instanceof AsyncFunction);
  if (plain && plainNames.has(nameOf(stepId))) {
    const outer = marked;
    marked = { run, stepId };
    let result: T;
    try {
      result = fn(arg);
    } finally {
      marked = outer;
    }
    if (isThenable(result)) plainNames.delete(nameOf(stepId));
    return result;
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
  if (isThenable(result)) {
    held = true;
    return result;
  }
  stepSettled();
  if (plain && plainNames.size < PLAIN_NAMES_MAX) plainNames.add(nameOf(stepId));
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
