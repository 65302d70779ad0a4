/**
 * @module resolvers
 * Internal: not part of the public API (the package exports only its index modules).
 * A promise with the functions that settle it (the shape of `Promise.withResolvers`, which Node 20
 * lacks), made with one executor function of this module instead of a closure of each caller.
 *
 * Why it matters on the hot path: V8 keeps the optimised code of a closure only while some closure
 * of that kind is alive. A closure made per call (a promise's executor, a `map` callback) dies with
 * the call, so after a worker's quiet spell and a full collection every such function is compiled
 * again, on the threads a busy machine has the least of. Functions of a module live as long as the
 * module (see docs/architecture.md, "Hot paths").
 */

export interface Resolvers<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T | PromiseLike<T>) => void;
  readonly reject: (reason?: unknown) => void;
}

// The executor runs synchronously inside the Promise constructor: the two slots hold its
// functions only from there to the end of `withResolvers`.
let resolveSlot: ((value: never) => void) | undefined;
let rejectSlot: ((reason?: unknown) => void) | undefined;

function capture(resolve: (value: never) => void, reject: (reason?: unknown) => void): void {
  resolveSlot = resolve;
  rejectSlot = reject;
}

/** A new pending promise with its resolve and reject functions. */
export function withResolvers<T>(): Resolvers<T> {
  const promise = new Promise<T>(capture as (resolve: (value: T | PromiseLike<T>) => void, reject: (reason?: unknown) => void) => void);
  const r: Resolvers<T> = { promise, resolve: resolveSlot as Resolvers<T>['resolve'], reject: rejectSlot as Resolvers<T>['reject'] };
  resolveSlot = undefined;
  rejectSlot = undefined;
  return r;
}
