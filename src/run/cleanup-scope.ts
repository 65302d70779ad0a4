/**
 * @module run/cleanup-scope
 * Internal: not part of the public API (the package exports only its index modules).
 * Where the calls of the cleanup scope (see `cleanup.ts`) stand apart from the code's.
 *
 * Identity. The code's calls take journal positions 0, 1, 2… in call order (`identity.ts`). How
 * many the code takes before its cleanup begins depends on when the cancel or the failure reached
 * it: a run resumed after a crash knows of the cancel from its start, and a result the first run
 * recorded without acting on it takes the resumed code one call further. So the cleanup's calls
 * are not identified by position: each is named after its scope and identified by name and
 * occurrence within the cleanup — `compensate:<step>` (with the occurrence of the step it undoes:
 * `compensate:book#2` undoes `book#2`) and `onCancel:<name>` for the calls of `ctx.onCancel`
 * handlers (`onCancel:release`, `onCancel:release#2`, counted among the handlers' calls). Their
 * journal rows live at positions from {@link CLEANUP_SEQ} on, taken in the order they were first
 * recorded; a resumed cleanup looks a call up by its id, whatever position it took. Their results
 * are handed back when asked for, not in the code's replay order, so the code's replay never
 * waits for them (nor they for it).
 *
 * Membership. A call belongs to the cleanup when it is made from inside it: the handlers and
 * compensations run in an async context of their own (AsyncLocalStorage), which their calls carry
 * through every `await`. The workflow code may still be running when its cleanup begins (a step
 * that ignored its signal past the grace period settles late); a call it makes then is refused with
 * the error that stopped it, and takes no identity of the cleanup's. The async context costs every
 * promise in the process a hook while it is enabled, so it is enabled only while a cleanup runs.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Journal positions from here on are the cleanup's (the code never takes a billion calls). */
export const CLEANUP_SEQ = 1_000_000_000;

/** Names a compensation's call: `compensate:<step>`. */
export const COMPENSATE = 'compensate:';
/** Names the call of an `onCancel` handler: `onCancel:<name>`. */
export const ON_CANCEL = 'onCancel:';

export function isCleanupSeq(seq: number): boolean {
  return seq >= CLEANUP_SEQ;
}

/**
 * Where a run is in its cleanup, as one value (`RunCore.cleanup`), moved forward by `cleanup.ts`:
 * - `code`: the workflow code runs; its calls start as usual.
 * - `stopped`: the code has stopped for good (`ended`: the halt or failure that stopped it, which
 *   its new calls are refused with); its calls in flight go on, and the cleanup waits for those
 *   with a compensation. A cleanup with nothing to do, or left to the next worker, stays here.
 * - `scope`: the cancel handlers and compensations run; a second cancel, a pause or a drain is not
 *   heard. `halt` is what a step of the code that settles late receives (its result is refused,
 *   its failure not retried).
 * - `over`: the scope ended; no call starts any more.
 */
export type CleanupPhase = { readonly kind: 'code' } | { readonly kind: 'stopped'; readonly ended: Error } | { readonly kind: 'scope' | 'over'; readonly ended: Error; readonly halt: Error };

export const CODE_RUNNING: CleanupPhase = { kind: 'code' };

/**
 * A completed step's compensation, registered when the code received its output: the primitive
 * that made the step hands the kernel how to run it as a call of the cleanup scope.
 */
export interface Compensation {
  /** The id of the step it undoes (`book`, `book#2`). */
  stepId: string;
  /** Runs the compensation (a call of the cleanup scope); rejects when it fails for good. */
  undo(): Promise<unknown>;
}

export interface CancelHandler {
  fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown;
  /**
   * What the handler does when the run fails for good instead (none: it runs only after a cancel).
   * The kernel's own handlers use it, for what must be undone on any end but success: a parent's
   * children (see primitives/child.ts).
   */
  onFailure?: (info: { signal: AbortSignal }) => unknown;
  /** What a failure of `onFailure` is reported as (the step it names in a CompensationFailedError). */
  failureLabel?: string;
}

/** How long the cleanup scope may take, unless the workflow says otherwise. */
export const DEFAULT_CLEANUP_MS = 60_000;

/** The cleanup scope is running now. */
export function inScope(p: CleanupPhase): boolean {
  return p.kind === 'scope';
}

/** From the start of the scope on: what a late step of the code receives; null before. */
export function lateHalt(p: CleanupPhase): Error | null {
  return p.kind === 'scope' || p.kind === 'over' ? p.halt : null;
}

/** The error a call of the code made after it stopped is refused with; null while it runs. */
export function refusalOf(p: CleanupPhase): Error | null {
  return p.kind === 'code' ? null : p.kind === 'stopped' ? p.ended : p.halt;
}

const scope = new AsyncLocalStorage<object>();
/** Cleanups in progress in this process (the async context is enabled while there are any). */
let open = 0;

/** Runs `fn` (the handlers and compensations of `run`) in the cleanup's async context. */
export async function inCleanup<T>(run: object, fn: () => Promise<T>): Promise<T> {
  open++;
  try {
    return await scope.run(run, fn);
  } finally {
    if (--open === 0) scope.disable();
  }
}

/** Whether the caller runs inside the cleanup of `run` (and not in the workflow code). */
export function calledFromCleanup(run: object): boolean {
  return scope.getStore() === run;
}
