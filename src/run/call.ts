/**
 * @module run/call
 * Internal: not part of the public API (the package exports only its index modules).
 * The one preamble of every `ctx` primitive (step, sleep, waitForEvent, and any later one): take
 * the call's position, hand a recorded result back in replay order, check the call's arguments,
 * refuse a call that may not start now (the run failed, halted, or holds new calls), and start the
 * call counted as live activity. A primitive is a {@link Primitive}: a constant object of plain
 * functions (no closure per call; the step path is hot).
 */
import type { StepKind, StepRow } from '../store.ts';
import { notNow, track, type Activity } from './activity.ts';
import { coreOf } from './core.ts';
import type { Run } from './run.ts';
import { isCleanupSeq } from './cleanup-scope.ts';
import { position, type Position } from './identity.ts';

export interface Primitive<A, B, S, T> {
  readonly kind: StepKind;
  /** The result recorded at the call's position (it may throw: a recorded failure). */
  replayed(rec: StepRow, stepId: string): T;
  /** Checks the call's arguments (throws when they are invalid) and prepares what `start` needs. */
  prepare(run: Run, pos: Position, a: A, b: B): S;
  /** Runs the call; counted as live activity until it settles or calls `activity.idle()`. */
  start(run: Run, prepared: S, activity: Activity): Promise<T>;
}

/**
 * Calls `primitive` named `name` with its arguments; never throws (a failure is a rejection).
 * `occurrence`: a compensation's identity in the cleanup scope (see `cleanup-scope.ts`).
 */
export function call<A, B, S, T>(view: Run, primitive: Primitive<A, B, S, T>, name: string, a: A, b: B, occurrence?: number): Promise<T> {
  const run = coreOf(view);
  let prepared: S;
  try {
    const pos = position(run, name, primitive.kind, occurrence);
    const rec = pos.recorded;
    if (rec && rec.done !== null) {
      return isCleanupSeq(pos.seq) ? run.replay.recalled(primitive.replayed, rec, pos.stepId) : run.replay.replayed(pos.seq, primitive.replayed, rec, pos.stepId);
    }
    prepared = primitive.prepare(run, pos, a, b);
  } catch (e) {
    return Promise.reject(e);
  }
  // Failed, halted, paused, draining or ended: the call does not start.
  if (run.state.kind !== 'running' || run.state.hold !== 'none') return notNow<T>(run);
  return track(run, primitive.start, prepared);
}
