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
 * `compensate:<step>`, and a handler's step `ctx.step('release', …)` is named `onCancel:release`;
 * each is checkpointed, retried per its policy, and recorded in the log, with its own idempotency
 * key. Their identity is their name and occurrence within the cleanup, apart from the code's
 * positions (see `cleanup-scope.ts`), so a run resumed after a crash in the middle of the cleanup
 * hands back what the first one recorded and runs the rest: a cancelling task whose worker died is
 * reclaimed, still `cancelling`, and its new run (told of the cancel from its start) replays the
 * code, then the cleanup. Before the scope begins, the code is handed back the recorded results it
 * asks for, as the first run's code had received them (see `TaskRun.execute`): compensations are
 * registered as the code receives its steps' outputs.
 *
 * A compensation or handler that fails for good does not stop the others; the task then fails with
 * a {@link CompensationFailedError} naming every failure and what ended the task (its error, or the
 * cancel and its reason), and saying that manual cleanup is needed — a cancelled task too
 * (`cancelling → failed`). Past the deadline, the step in progress is stopped (its signal fires; a
 * handler or compensation that ignores it for `cancelGraceMs` is left behind, reported as not
 * finished, and any call it makes later is refused) and what had not run yet is reported as not run. A lost lease stops the scope at once (nothing may be written any
 * more); the end of the worker's grace period stops it too, and the run then writes no end: the
 * task keeps its status, and the worker that takes it over once its lease has expired resumes the
 * cleanup. A pause or a drain does not hold the cleanup's calls (it is bounded by its deadline).
 */
import { CompensationFailedError, TaskCancelledError, TimeoutError, coerceError } from '../errors.ts';
import type { StepContext } from '../workflow.ts';
import type { RunCore } from './core.ts';
import type { Settled } from './outcome.ts';
import { RUNNING, cancelOf, fatalOf, haltOf, mayWrite, type RunState } from './state.ts';
import { compensationStep } from './step.ts';
import { inCleanup } from './cleanup-scope.ts';
import { faultPoint } from '../fault-points.ts';

/** A completed step's compensation, registered when the code received its output. */
export interface Compensation {
  /** The step's name and occurrence (`book`, 2 for `book#2`). */
  name: string;
  occurrence: number;
  output: unknown;
  fn: (output: unknown, s: StepContext) => unknown;
  retry: import('../retry.ts').RetryOptions | number | undefined;
}

export interface CancelHandler {
  fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown;
}

/** How long the cleanup scope may take, unless the workflow says otherwise. */
export const DEFAULT_CLEANUP_MS = 60_000;

/** How the cleanup went. */
export interface CleanupResult {
  /** It failed for good: the run ends failed with this error, whether the task was cancelled or failing. */
  failure: CompensationFailedError | null;
  /** The worker's grace period ended during it: the run writes no end (the next worker resumes it). */
  interrupted: boolean;
}

const DONE: CleanupResult = { failure: null, interrupted: false };
const OVERRAN = Symbol('overran');

/**
 * Whether the run fails for good: the code made an illegal call, or it threw. A pause requested or
 * a drain does not change that (the run then ends `failed` all the same), so neither skips the
 * compensations.
 */
function failing(state: RunState, result: Settled | null): boolean {
  if (state.kind === 'failed') return true;
  return state.kind === 'running' && result !== null && !result.ok;
}

/** Whether the run's end calls for a cleanup: a cancel, or a failure for good. */
export function cleanupDue(state: RunState, result: Settled | null): boolean {
  return state.kind === 'cancelled' || failing(state, result);
}

/** Runs the cancel handlers and compensations that the run's end calls for; see the module doc. */
export async function runCleanup(run: RunCore, result: Settled | null): Promise<CleanupResult> {
  const saved = run.state;
  if (!cleanupDue(saved, result)) return DONE;
  const cancel = saved.kind === 'cancelled' ? cancelOf(saved) : null;
  const handlers = cancel ? [...run.cancelHandlers] : [];
  const compensations = [...run.compensations].reverse();
  if (!handlers.length && !compensations.length) return DONE;
  // The worker's grace period is over: the worker that takes the task over runs the cleanup.
  if (run.shutDown) return { failure: null, interrupted: true };

  // The scope: calls start again, under a fresh signal that only the scope's deadline (or a lost
  // lease, or the end of the worker's grace period) fires; a second cancel is not heard (see TaskRun.cancel).
  run.cleaning = true;
  run.replay.closeForCleanup();
  run.cleanupHalt = haltOf(saved) ?? fatalOf(saved) ?? new Error(`Task ${run.taskId}: the run has ended`);
  run.state = RUNNING;
  run.aborted = false;
  run.abortReason = undefined;
  run.controller = null;
  const stop = new AbortController();
  const limitMs = run.cleanupMs;
  let expired: TimeoutError | null = null;
  let pastDeadline!: () => void;
  const deadline = new Promise<void>((resolve) => (pastDeadline = resolve));
  run.deps.clock.sleep(limitMs, stop.signal).then(
    () => {
      run.abortRun((expired = new TimeoutError(`The cleanup of task ${run.taskId} ran past its ${limitMs} ms deadline`)));
      pastDeadline();
    },
    () => undefined,
  );
  // Past the deadline a handler or compensation gets `cancelGraceMs` (real time, like the cancel's
  // grace) to hear its signal; one that ignores it is left behind and reported as not finished.
  let graceTimer: NodeJS.Timeout | undefined;
  const overrun = deadline.then(() => new Promise<typeof OVERRAN>((resolve) => (graceTimer = setTimeout(() => resolve(OVERRAN), run.deps.cancelGraceMs))));
  const bounded = async (step: string, work: () => unknown): Promise<void> => {
    const p = Promise.resolve().then(work);
    if ((await Promise.race([p, overrun])) !== OVERRAN) return;
    p.catch(() => undefined); // settles later, unheard
    failures.push({ step, error: new Error(`did not finish: ${(expired as TimeoutError).message}; it ignored its signal and was left running`) });
  };
  const failures: Array<{ step: string; error: Error }> = [];
  /**
   * Whether `step` is not to run: past the deadline, or after a failure of the scope (an illegal
   * call), it is reported as not run; after a halt (a lost lease, the end of the worker's grace
   * period) it is left to the next run.
   */
  const skipped = (step: string): boolean => {
    const why = expired ?? fatalOf(run.state);
    if (why) failures.push({ step, error: new Error(`not run: ${why.message}`) });
    return why !== null || run.state.kind !== 'running';
  };
  /** A failure of `step`, unless a halt of the scope caused it. */
  const failed = (step: string, e: unknown): void => {
    const fatal = fatalOf(run.state);
    if (run.state.kind === 'running' || fatal) failures.push({ step, error: fatal ?? coerceError(e) });
  };
  try {
    await inCleanup(run, async () => {
      for (const h of handlers) {
        if (skipped('onCancel')) continue;
        try {
          await bounded('onCancel', () => h.fn({ reason: cancel?.reason, signal: run.signal }));
        } catch (e) {
          failed('onCancel', e);
        }
      }
      for (const c of compensations) {
        const stepId = c.occurrence === 1 ? c.name : `${c.name}#${c.occurrence}`;
        if (skipped(stepId)) continue;
        try {
          await bounded(stepId, () => compensationStep(run, c));
        } catch (e) {
          failed(stepId, e);
        }
      }
    });
  } finally {
    stop.abort(null);
    clearTimeout(graceTimer);
    run.cleaning = false;
    run.cleanedUp = true;
  }
  // What the cleanup recorded is durable before the run's end (or before it stops without one).
  if (mayWrite(run.state)) await run.writer.flush().catch(() => undefined);
  faultPoint('cleanup:done');
  // A lost lease (or a database gone) during the scope wins; otherwise the run ends as it would have.
  const during = run.state;
  run.state = during.kind === 'lost' ? during : saved;
  if (during.kind === 'stopping') return { failure: null, interrupted: true };
  if (!failures.length || during.kind === 'lost') return DONE;
  if (cancel) return { failure: new CompensationFailedError(run.taskId, new TaskCancelledError(run.taskId, cancel.reason), failures, cancel), interrupted: false };
  const original = saved.kind === 'failed' ? saved.error : result && !result.ok ? coerceError(result.error) : null;
  return { failure: new CompensationFailedError(run.taskId, original, failures), interrupted: false };
}
