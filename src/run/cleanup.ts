/**
 * @module run/cleanup
 * Internal: not part of the public API (the package exports only its index modules).
 * What runs after the workflow code has stopped for good, in a scope that a cancel does not
 * interrupt and with its own deadline (`cleanupTimeout`, on the engine's clock):
 * - after a cancel, the handlers registered with `ctx.onCancel(fn)`, in registration order;
 * - after a cancel or a failure for good (a step that failed, a deadline), the compensations of the
 *   steps that completed (`ctx.step(name, fn, { compensate })`), in reverse order of completion.
 *
 * Inside the scope `ctx.step` works as usual: each compensation is itself a step named
 * `compensate:<step>`, checkpointed, retried per the step's policy, and recorded in the log, with
 * its own idempotency key. A compensation that fails for good does not stop the others; the task
 * then fails with a {@link CompensationFailedError} naming every failure and saying that manual
 * cleanup is needed (a cancelled task stays cancelled, with the failures in its abort detail).
 * A lost lease stops the scope at once (nothing may be written any more).
 */
import { CompensationFailedError, TimeoutError, coerceError } from '../errors.ts';
import type { StepContext } from '../workflow.ts';
import type { RunCore } from './core.ts';
import type { Settled } from './outcome.ts';
import { RUNNING, cancelOf, fatalOf, haltOf, type RunState } from './state.ts';
import { step } from './step.ts';

/** A completed step's compensation, registered when the code received its output. */
export interface Compensation {
  stepId: string;
  output: unknown;
  fn: (output: unknown, s: StepContext) => unknown;
  retry: import('../retry.ts').RetryOptions | number | undefined;
}

export interface CancelHandler {
  fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown;
}

/** How long the cleanup scope may take, unless the workflow says otherwise. */
export const DEFAULT_CLEANUP_MS = 60_000;

/** What the run ends with after its cleanup: the same, or a failure that names the compensations that failed. */
export interface CleanupResult {
  result: Settled | null;
  /** Failures of compensations after a cancel (the task stays cancelled; they go into the log). */
  cancelNote: string | null;
}

function failing(state: RunState, result: Settled | null): boolean {
  if (state.kind === 'failed') return true;
  return state.kind === 'running' && state.hold === 'none' && result !== null && !result.ok;
}

/** Runs the cancel handlers and compensations that the run's end calls for; see the module doc. */
export async function runCleanup(run: RunCore, result: Settled | null): Promise<CleanupResult> {
  const saved = run.state;
  const cancel = saved.kind === 'cancelled' ? cancelOf(saved) : null;
  const handlers = cancel ? run.cancelHandlers : [];
  const compensations = cancel || failing(saved, result) ? [...run.compensations].reverse() : [];
  if (!handlers.length && !compensations.length) return { result, cancelNote: null };

  // The scope: calls start again, under a fresh signal that only the scope's deadline (or a lost
  // lease) fires; a second cancel is not heard (see TaskRun.cancel).
  run.cleaning = true;
  run.cleanupHalt = haltOf(saved) ?? fatalOf(saved) ?? new Error(`Task ${run.taskId}: the run has ended`);
  run.state = RUNNING;
  run.aborted = false;
  run.abortReason = undefined;
  run.controller = null;
  const stop = new AbortController();
  const limitMs = run.cleanupMs;
  run.deps.clock.sleep(limitMs, stop.signal).then(
    () => run.abortRun(new TimeoutError(`The cleanup of task ${run.taskId} ran past its ${limitMs} ms deadline`)),
    () => undefined,
  );
  const failures: Array<{ step: string; error: Error }> = [];
  try {
    for (const h of handlers) {
      if (run.state.kind !== 'running') break;
      try {
        await h.fn({ reason: cancel?.reason, signal: run.signal });
      } catch (e) {
        failures.push({ step: 'onCancel', error: coerceError(e) });
      }
    }
    for (const c of compensations) {
      if (run.state.kind !== 'running') break;
      try {
        await step(run, `compensate:${c.stepId}`, (s) => c.fn(c.output, s), c.retry === undefined ? {} : { retry: c.retry });
      } catch (e) {
        failures.push({ step: c.stepId, error: coerceError(e) });
      }
    }
    await run.writer.flush();
  } finally {
    stop.abort(null);
    run.cleaning = false;
  }
  // A lost lease (or a database gone) during the scope wins; otherwise the run ends as it would have.
  const during = run.state;
  run.state = during.kind === 'lost' ? during : saved;
  if (!failures.length) return { result, cancelNote: null };
  const original = saved.kind === 'failed' ? saved.error : result && !result.ok ? coerceError(result.error) : null;
  const error = new CompensationFailedError(run.taskId, original, failures);
  if (cancel) return { result, cancelNote: error.message };
  if (run.state.kind === 'failed') run.state = { ...run.state, error };
  return { result: { ok: false, error }, cancelNote: null };
}
