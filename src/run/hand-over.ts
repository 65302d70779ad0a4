/**
 * @module run/hand-over
 * Internal: not part of the public API (the package exports only its index modules).
 * The bookkeeping of the results on their way to the code (see `Replay.inOrder` in `replay.ts`):
 * each order of hand-overs is a {@link Chain}, and a result waits for the release of the one
 * before it only when there is one; the promise it waits for is made only then.
 */
import { withResolvers } from '../resolvers.ts';

/** A result on its way to the code (see `Replay.inOrder`). */
export interface HandOver {
  readonly done: number;
  readonly afterHandOver: (() => void) | undefined;
  readonly cleanup: boolean;
  /** Counted in `run.gated` (ready, and waiting for its turn). */
  gated: boolean;
  /** What the next result of its chain waits for: made only when a next result comes before this one is released. */
  opened: Promise<void> | null;
  open: (() => void) | null;
  /** A reserved place given up (see `Replay.reserve`): released in its turn, handing the code nothing. */
  void: boolean;
}

/** A place taken in the order before the result's value is known (see `Replay.reserve`). */
export interface Reservation<T> {
  /** What the code receives, in the place's turn. */
  readonly promise: Promise<T>;
  /** The result: `value()`, or what it throws. */
  settle(value: () => T): void;
  /** No result comes (the write that recorded it failed): the next result takes the turn. */
  cancel(): void;
}

/**
 * One order of hand-overs (the code's results, or the cleanup scope's): what its next result waits
 * for. `gate` is the replay's end (the code's chain, while recorded results remain to be handed
 * back); `tail` the last result not released yet. Both null: the next result waits for nothing.
 */
export interface Chain {
  gate: Promise<void> | null;
  tail: HandOver | null;
}

/** The work whose result is handed over next (bound to it as the gate's continuation). */
export function resultOf<T>(work: Promise<T>): Promise<T> {
  return work;
}

/** `value()` as a promise: rejected with what it throws. */
export function settledWith<T>(value: () => T): Promise<T> {
  try {
    return Promise.resolve(value());
  } catch (e) {
    return Promise.reject(e);
  }
}

/** Settles `slot` with `value()`, or rejects it with what that throws. */
export function settleWith<T>(slot: { resolve: (v: T) => void; reject: (e: unknown) => void }, value: () => T): void {
  try {
    slot.resolve(value());
  } catch (e) {
    slot.reject(e);
  }
}

/** What the result after `h` waits for: `h`'s release. */
export function opened(h: HandOver): Promise<void> {
  if (h.opened === null) ({ promise: h.opened, resolve: h.open } = withResolvers<void>());
  return h.opened;
}
