/**
 * @module run/step-scope
 * Internal: not part of the public API (the package exports only its index modules).
 * Which step's function is running, as the async context of that function's code: a durable call
 * made from inside it (directly, or through a helper that takes `ctx`) sees the enclosing step,
 * while calls running beside it (`Promise.all` of two steps in the workflow code) do not.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface Enclosing {
  readonly run: object;
  readonly stepId: string;
}

const scope = new AsyncLocalStorage<Enclosing>();

/** Calls a step's function `fn` of `run` as the code of step `stepId`. */
export function runAsStep<T>(run: object, stepId: string, fn: () => T): T {
  return scope.run({ run, stepId }, fn);
}

/** The step of `run` whose function is making the current call, or null (the workflow code's own call). */
export function enclosingStep(run: object): string | null {
  const s = scope.getStore();
  return s !== undefined && s.run === run ? s.stepId : null;
}
