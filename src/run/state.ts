/**
 * @module run/state
 * Internal: not part of the public API (the package exports only its index modules).
 * How a run stands, as one value. Commands from the worker (cancel, lost lease, pause, drain,
 * shutdown) and failures the run finds itself (an illegal call, a database that stays away) move it
 * from one state to the next through the pure functions below; the calls of the code read it to
 * know whether they may start, and {@link decideEnd} reads it to choose the run's last transition.
 *
 * Kinds, in the order in which they win at the end of the run: `lost` (the lease is lost, or the
 * database stayed away: the run writes nothing more) over `cancelled` over `failed` (the code made
 * an illegal call or diverged from its journal) over `stopping` (the worker's grace period is over)
 * over `running`. A halt (`stopping`, `cancelled`, `lost`) fires the run's signal once, with the
 * first halt's error, which every later call receives; an illegal call's error is received before
 * it. That is why a later kind keeps the first halt's error and the illegal call's error.
 *
 * `hold` is what stops new calls from starting (they do not resolve in this run): a pause request,
 * a draining worker, or both (a pause wins at the end; withdrawing it leaves the drain), or the end
 * of the run (`ended`: the code's run is over and the last transition is being prepared; pause and
 * drain requests no longer change anything). It is kept through a halt, because calls it held stay
 * held and the run still ends as soon as it is quiet; a halt after the end still counts (a cancel
 * heard while the last transition is written turns it into an abort).
 */
import type { WorkerStoppingError } from '../errors.ts';

export type Hold = 'none' | 'pause' | 'drain' | 'pause+drain' | 'ended';

export type RunState =
  /** Calls start unless `hold` says otherwise. */
  | { readonly kind: 'running'; readonly hold: Hold }
  /** The code made an illegal call or diverged from its journal (`error`); `halt`: the grace period ended too. */
  | { readonly kind: 'failed'; readonly error: Error; readonly halt: WorkerStoppingError | null; readonly hold: Hold }
  /** The worker's grace period is over: the task goes back to pending. */
  | { readonly kind: 'stopping'; readonly halt: WorkerStoppingError; readonly hold: Hold }
  /** The task was cancelled: the run ends `cancelled` after its cleanup (`halt` is the first halt's error, maybe a shutdown's). */
  | { readonly kind: 'cancelled'; readonly reason: string | undefined; readonly halt: Error; readonly fatal: Error | null; readonly hold: Hold }
  /** The run may not write any more. */
  | {
      readonly kind: 'lost';
      /** `store`: the database stayed away (writes already started settle before the run ends). */
      readonly by: 'lease' | 'store';
      readonly halt: Error;
      readonly fatal: Error | null;
      /** A cancel heard before or after: its reason still goes with an abort written meanwhile. */
      readonly cancel: { readonly reason: string | undefined } | null;
      readonly hold: Hold;
    };

export const RUNNING: RunState = { kind: 'running', hold: 'none' };

// --- queries ------------------------------------------------------------------------------------

/** The first halt's error (what calls receive once the run is halted), or null. */
export function haltOf(s: RunState): Error | null {
  return s.kind === 'running' ? null : s.halt;
}

/** The run gave up its lease: it writes nothing more, and its lease is not to be renewed. */
export function isLeaseLost(s: RunState): boolean {
  return s.kind === 'lost' && s.by === 'lease';
}

/** A call that goes on after waiting stops here if the run was halted meanwhile. */
export function throwIfHalted(s: RunState): void {
  const halt = haltOf(s);
  if (halt) throw halt;
}

/** The halt's error, for a call stopped by a halt (or by a run that may not write any more). */
export function haltReason(s: RunState): Error {
  return haltOf(s) ?? new Error('run halted');
}

/** The error of an illegal call, which fails the run whatever the code does with it. */
export function fatalOf(s: RunState): Error | null {
  switch (s.kind) {
    case 'running':
    case 'stopping':
      return null;
    case 'failed':
      return s.error;
    default:
      return s.fatal;
  }
}

/** Whether the run may still write: not after losing its lease or giving up on the database. */
export function mayWrite(s: RunState): boolean {
  return s.kind !== 'lost';
}

/** The code's run is over: no more hand-overs, idle checks or calls; unwritten rows go with the last transition. */
export function hasEnded(s: RunState): boolean {
  return s.hold === 'ended';
}

export function pauseRequested(s: RunState): boolean {
  return s.hold === 'pause' || s.hold === 'pause+drain';
}

/** Whether this run heard a cancel (and with which reason). */
export function cancelOf(s: RunState): { readonly reason: string | undefined } | null {
  return s.kind === 'cancelled' ? s : s.kind === 'lost' ? s.cancel : null;
}

// --- transitions (each returns the same object when nothing changes) ----------------------------

function withHold(s: RunState, hold: Hold): RunState {
  return hold === s.hold ? s : { ...s, hold };
}

export function withPause(s: RunState): RunState {
  return withHold(s, s.hold === 'none' ? 'pause' : s.hold === 'drain' ? 'pause+drain' : s.hold);
}

export function withoutPause(s: RunState): RunState {
  return withHold(s, s.hold === 'pause' ? 'none' : s.hold === 'pause+drain' ? 'drain' : s.hold);
}

export function withDrain(s: RunState): RunState {
  return withHold(s, s.hold === 'none' ? 'drain' : s.hold === 'pause' ? 'pause+drain' : s.hold);
}

export function withEnd(s: RunState): RunState {
  return withHold(s, 'ended');
}

/** An illegal call: the run fails (unless something that wins over it ended the run already). */
export function withFatal(s: RunState, error: Error): RunState {
  switch (s.kind) {
    case 'running':
      return { kind: 'failed', error, halt: null, hold: s.hold };
    case 'stopping':
      return { kind: 'failed', error, halt: s.halt, hold: s.hold };
    case 'failed':
      return s;
    default:
      return s.fatal ? s : { ...s, fatal: error };
  }
}

/** The worker's grace period is over. `halt` makes the error, if it is the first halt. */
export function withShutdown(s: RunState, halt: () => WorkerStoppingError): RunState {
  if (s.kind === 'running') return { kind: 'stopping', halt: halt(), hold: s.hold };
  if (s.kind === 'failed' && !s.halt) return { ...s, halt: halt() };
  return s;
}

export function withCancel(s: RunState, reason: string | undefined, halt: () => Error): RunState {
  switch (s.kind) {
    case 'running':
      return { kind: 'cancelled', reason, halt: halt(), fatal: null, hold: s.hold };
    case 'failed':
      return { kind: 'cancelled', reason, halt: s.halt ?? halt(), fatal: s.error, hold: s.hold };
    case 'stopping':
      return { kind: 'cancelled', reason, halt: s.halt, fatal: null, hold: s.hold };
    case 'cancelled':
      return s;
    case 'lost':
      return s.cancel ? s : { ...s, cancel: { reason } };
  }
}

/** Another worker owns the task now (or may, any moment). */
export function withLeaseLost(s: RunState, halt: () => Error): RunState {
  switch (s.kind) {
    case 'running':
      return { kind: 'lost', by: 'lease', halt: halt(), fatal: null, cancel: null, hold: s.hold };
    case 'failed':
      return { kind: 'lost', by: 'lease', halt: s.halt ?? halt(), fatal: s.error, cancel: null, hold: s.hold };
    case 'stopping':
      return { kind: 'lost', by: 'lease', halt: s.halt, fatal: null, cancel: null, hold: s.hold };
    case 'cancelled':
      return { kind: 'lost', by: 'lease', halt: s.halt, fatal: s.fatal, cancel: { reason: s.reason }, hold: s.hold };
    case 'lost':
      return s.by === 'lease' ? s : { ...s, by: 'lease' };
  }
}

/**
 * A checkpoint could not be written while the lease was surely ours. Only as the first halt: after
 * a cancel or a shutdown the run still writes its last transition (with the same retries).
 */
export function withStoreLost(s: RunState, halt: () => Error): RunState {
  if (s.kind === 'running') return { kind: 'lost', by: 'store', halt: halt(), fatal: null, cancel: null, hold: s.hold };
  if (s.kind === 'failed' && !s.halt) return { kind: 'lost', by: 'store', halt: halt(), fatal: s.error, cancel: null, hold: s.hold };
  return s;
}
