/**
 * @module run/outcome
 * Internal: not part of the public API (the package exports only its index modules).
 * How a run ends: {@link decideEnd} turns the run's state and what its code did into the one
 * lifecycle transition the run writes last (complete, fail, park, suspend, release or abort), or
 * into `'lease-lost'` when the run may not write anything more. A cleanup that failed for good
 * fails the task whatever ended it, a cancel included. A pure function: the writer carries
 * its answer out (and re-plans it if the task changed meanwhile, see `writer.ts`).
 */
import { NonDeterminismError, coerceError } from '../errors.ts';
import type { LifecycleEvent } from '../lifecycle.ts';
import { encodeError } from '../serialize.ts';
import { encodeWithin } from '../limits.ts';
import type { StepRow, TaskPatch } from '../store.ts';

/** A wait registered by the code: the task may park on it. */
export interface Wait {
  row: StepRow;
  wakeAt: number | null;
  events: readonly string[];
  describe: Record<string, unknown>;
  /** Set by {@link waitFor}: ends the wait in-process before its deadline (a signal arrived). */
  wake?: () => void;
  /**
   * Set by {@link waitFor} for a wait that settles in-process: arms its deadline's timer again
   * when a parked run is resumed in memory (see `resume.ts`).
   */
  rearm?: () => void;
}
import { pauseRequested, type RunState } from './state.ts';

/** How the workflow function settled. */
export type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/** What the run did, as far as its end is concerned. */
export interface RunOutcome {
  /** How the workflow function settled, or null: it has not (it can only wait, or was stopped). */
  readonly result: Settled | null;
  /** Calls refused because of a pause or a drain: the run cannot finish in this run any more. */
  readonly refused: number;
  /** The waits registered and not over, in the order they were registered. */
  readonly waits: readonly Wait[];
  /** The journal the run started with, by position, and how many positions the code took. */
  readonly journal: ReadonlyMap<number, StepRow>;
  readonly calls: number;
  readonly taskId: string;
  readonly workflowName: string;
  /** The task and its workflow versions, for messages ("Task t1 (workflow "w" version 2)"). */
  readonly who: string;
  /** The largest output accepted, in bytes of JSON (`EngineOptions.limits.outputBytes`). */
  readonly outputBytes: number;
  /** When the task must be finished, or null: a park wakes it by then at the latest. */
  readonly deadline?: number | null;
  /** The cleanup after a cancel or a failure failed for good (see `cleanup.ts`). */
  readonly cleanupFailure?: Error | null;
}

/** The last transition to write: its event, the task's columns it sets, its history detail, its journal rows. */
export interface EndPlan {
  readonly event: LifecycleEvent;
  readonly set?: TaskPatch;
  readonly detail?: unknown;
  readonly steps?: StepRow[];
  /** Journal positions forgotten by the same write (a re-run's undo, see `undo-rerun.ts`). */
  readonly deleteSteps?: readonly number[];
  /** Written as it is also when the task is cancelling (a failed cleanup: `fail` from `cancelling`). */
  readonly overridesCancel?: boolean;
}

function fail(error: Error): EndPlan {
  return { event: 'fail', set: { error: encodeError(error) }, detail: { error: error.message } };
}

function release(steps: StepRow[], reason: string): EndPlan {
  return { event: 'release', steps, detail: { reason } };
}

/** Parks on every registered wait: due at the earliest deadline, or when any awaited event arrives. */
function park(waits: readonly Wait[], steps: StepRow[], taskDeadline: number | null): EndPlan {
  const deadlines = waits.map((w) => w.wakeAt).filter((t): t is number => t !== null);
  if (taskDeadline !== null) deadlines.push(taskDeadline);
  const wakeAt = deadlines.length ? Math.min(...deadlines) : null;
  const events = [...new Set(waits.flatMap((w) => w.events))];
  const wait = waits.length === 1 ? (waits[0] as Wait).describe : { kind: 'several', until: wakeAt, waits: waits.map((w) => w.describe) };
  return { event: 'park', steps, set: { runAt: wakeAt, wait: JSON.stringify(wait), waitEvents: events.length ? events : null }, detail: wait };
}

/** The run's last transition; `'lease-lost'` when it may not write any more. */
export function decideEnd(state: RunState, o: RunOutcome): EndPlan | 'lease-lost' {
  if (state.kind === 'lost') return 'lease-lost';
  // What the task did is not fully undone: it fails, also after a cancel (people must clean up).
  if (o.cleanupFailure) {
    const error = o.cleanupFailure;
    const detail = state.kind === 'cancelled' ? { error: error.message, reason: state.reason ?? null } : { error: error.message };
    return { event: 'fail', set: { error: encodeError(error) }, detail, overridesCancel: true };
  }
  if (state.kind === 'cancelled') return { event: 'abort', detail: { reason: state.reason ?? null } };
  if (state.kind === 'failed') return fail(state.error);
  const rows = o.waits.map((w) => w.row);
  if (state.kind === 'stopping') return release(rows, state.halt.message);
  const { result } = o;
  if (!result) {
    // The code can only wait (or was asked to stop starting work).
    if (pauseRequested(state)) return { event: 'suspend', steps: rows, detail: { reason: 'pause requested' } };
    if (state.hold === 'drain') return release(rows, 'worker stopping');
    if (o.refused) return release(rows, 'pause withdrawn');
    if (o.waits.length) return park(o.waits, rows, o.deadline ?? null);
    return release(rows, 'run did not settle');
  }
  if (!result.ok) return fail(coerceError(result.error));
  const leftover = [...o.journal.keys()].filter((seq) => seq >= o.calls).sort((a, b) => a - b);
  if (leftover.length) {
    const first = o.journal.get(leftover[0] as number) as StepRow;
    return fail(
      new NonDeterminismError(
        o.taskId,
        first.seq,
        `${o.who}: the workflow returned after ${o.calls} step(s), but the journal has ${leftover.length} more, starting with ${first.kind} "${first.name}" at position ${first.seq}. The code changed while the task was in flight.`,
      ),
    );
  }
  let output: string | null;
  try {
    output = encodeWithin(result.value, () => `The output of workflow "${o.workflowName}"`, o.outputBytes, 'outputBytes');
  } catch (e) {
    return fail(e as Error);
  }
  return { event: 'complete', set: { output } };
}
