/**
 * @module run/cleanup
 * Internal: not part of the public API (the package exports only its index modules).
 * What runs after the workflow code has stopped for good, in a scope that a cancel does not
 * interrupt and with its own deadline (`cleanupTimeout`, on the engine's clock):
 * - after a cancel, the handlers registered with `ctx.onCancel(fn)`, in registration order (and
 *   the kernel's own, such as the one that cancels a parent's children); after a failure for good,
 *   the kernel's handlers that have an `onFailure` (a parent's children started with
 *   `onParentEnd: 'cancel'` are cancelled and their ends awaited, even when the code was not
 *   waited for: a run failed from outside, or past its deadline);
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
 * Steps still in flight. When the code stops for good, a step of its with a compensation may still
 * be running (a `Promise.all` branch beside the step that failed). From then on the code's new
 * calls are refused, and the cleanup waits for such steps before its scope begins (see
 * {@link settleUndoable}: up to the cleanup's deadline for steps that were not told to stop; steps
 * told to stop had the grace period already), so that one that completes is compensated. One
 * still running then is reported as not undone in the {@link CompensationFailedError}.
 *
 * A compensation or handler that fails for good does not stop the others; the task then fails with
 * a {@link CompensationFailedError} naming every failure and what ended the task (its error, or the
 * cancel and its reason), and saying that manual cleanup is needed — a cancelled task too
 * (`cancelling → failed`). Past the deadline, the step in progress is stopped (its signal fires; a
 * handler or compensation that ignores it for `cancelGraceMs` is left behind, reported as not
 * finished, and any call it makes later is refused) and what had not run yet is reported as not
 * run. A lost lease stops the scope at once (nothing may be written any more); the end of the
 * worker's grace period stops it too (its signal fires; a handler or compensation that ignores it
 * for `cancelGraceMs` is left behind, so that `worker.stop()` keeps its bound), and the run then
 * writes no end: the task keeps its status, and the worker that takes it over once its lease has
 * expired resumes the cleanup. A pause or a drain does not hold the cleanup's calls (it is bounded
 * by its deadline).
 */
import { CompensationFailedError, TaskCancelledError, TimeoutError, coerceError } from '../errors.ts';
import type { RunCore } from './core.ts';
import type { Settled } from './outcome.ts';
import { RUNNING, cancelOf, fatalOf, haltOf, mayWrite, type RunState } from './state.ts';
import { inCleanup, type CancelHandler, type Compensation } from './cleanup-scope.ts';
import { faultPoint } from '../fault-points.ts';
import { compensationsToUndo, undoing } from './undo-rerun.ts';

/** How the cleanup went. */
export interface CleanupResult {
  /** It failed for good: the run ends failed with this error, whether the task was cancelled or failing. */
  failure: CompensationFailedError | null;
  /** The worker's grace period ended during it: the run writes no end (the next worker resumes it). */
  interrupted: boolean;
}

const DONE: CleanupResult = { failure: null, interrupted: false };
const OVERRAN = Symbol('overran');
const LEFT = Symbol('left');

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

/** The cleanup's deadline (`cleanupTimeout`, on the engine's clock), armed when the code has stopped. */
interface CleanupDeadline {
  /** Its error once it has passed (the run's signal then fires with it), else null. */
  expired: TimeoutError | null;
  /** The code's steps with a compensation that were still running when it passed. */
  running: string[];
  /** Resolves `cancelGraceMs` (real time, like the cancel's grace) after the deadline has passed. */
  readonly overrun: Promise<typeof OVERRAN>;
  dispose(): void;
}

function armCleanupDeadline(run: RunCore): CleanupDeadline {
  const stop = new AbortController();
  let graceTimer: NodeJS.Timeout | undefined;
  const limitMs = run.cleanupMs;
  const d: CleanupDeadline = {
    expired: null,
    running: [],
    overrun: run.deps.clock.sleep(limitMs, stop.signal).then(
      () => {
        d.running = [...run.undoable];
        run.abortRun((d.expired = new TimeoutError(`The cleanup of task ${run.taskId} ran past its ${limitMs} ms deadline`)));
        return new Promise<typeof OVERRAN>((resolve) => (graceTimer = setTimeout(() => resolve(OVERRAN), run.deps.cancelGraceMs)));
      },
      () => new Promise<typeof OVERRAN>(() => undefined),
    ),
    dispose: () => {
      stop.abort(null);
      clearTimeout(graceTimer);
    },
  };
  return d;
}

/**
 * Before the scope: the code's steps with a compensation still in flight (a `Promise.all` branch
 * beside the step that failed) are waited for, so that one that completes has its compensation
 * registered; returns those still running at the end of the wait. They were not told to stop, and
 * their results count: cutting a booking off in the middle of its call would leave its effect
 * unknown, where waiting for it lets its compensation undo it. So the wait is the first part of the
 * cleanup, bounded by the cleanup's deadline (on the engine's clock, like the rest of the cleanup;
 * `cancelGraceMs` is the bound for steps that were told to stop); past it, their signal fires and
 * the wait ends. Steps already told to stop (a cancel, the task's deadline, the worker's grace
 * period) had their grace period before the cleanup (see `TaskRun.execute`): they are not waited
 * for again, nor are steps whose results wait behind a replay that waits for a call the code will
 * not make. A cancel heard during the wait fires their signal and gives them the grace period (the
 * cleanup then runs the cancel handlers too).
 */
async function settleUndoable(run: RunCore, d: CleanupDeadline): Promise<string[]> {
  // A replay still waiting for a call the code will not make could not hand their results over.
  if (!run.undoable.size || run.aborted || run.replay.pending) return [...run.undoable];
  let graceEnds = Infinity;
  while (run.undoable.size && mayWrite(run.state) && Date.now() < graceEnds && !d.expired) {
    if (run.aborted && graceEnds === Infinity) graceEnds = Date.now() + run.deps.cancelGraceMs;
    // Woken when one settles, the state moves or the run is aborted (the deadline, too).
    await run.nextChange(graceEnds - Date.now());
  }
  return d.expired ? d.running : [...run.undoable];
}

/** What the cleanup scope runs, and the failures it reports (added to as it goes). */
interface ScopeWork {
  ended: Error;
  halt: Error;
  cancel: { reason: string | undefined } | null;
  handlers: CancelHandler[];
  compensations: Compensation[];
  failures: Array<{ step: string; error: Error }>;
}

/** Runs the cancel handlers, then the compensations, in the cleanup scope (see the module doc). */
async function runScope(run: RunCore, d: CleanupDeadline, w: ScopeWork): Promise<void> {
  const { ended, halt, cancel, handlers, compensations, failures } = w;
  // The scope: calls start again, under a fresh signal that only the scope's deadline (or a lost
  // lease, or the end of the worker's grace period) fires; a second cancel is not heard (see TaskRun.cancel).
  run.cleanup = { kind: 'scope', ended, halt };
  run.replay.closeForCleanup();
  run.state = RUNNING;
  run.aborted = false;
  run.abortReason = undefined;
  run.controller = null;
  // A halt of the scope (the end of the worker's grace period, a lost lease) leaves behind a call
  // that has not settled `cancelGraceMs` after the signal fired (at once after a lost lease: nothing
  // may be written any more); the run then writes no end. The deadline is `overrun`'s.
  let leftTimer: NodeJS.Timeout | undefined;
  let leave!: () => void;
  const left = new Promise<typeof LEFT>((resolve) => (leave = () => resolve(LEFT)));
  run.signal.addEventListener(
    'abort',
    () => {
      if (!d.expired) leftTimer = setTimeout(leave, mayWrite(run.state) ? run.deps.cancelGraceMs : 0);
    },
    { once: true },
  );
  // Past the deadline a handler or compensation gets `cancelGraceMs` to hear its signal; one that
  // ignores it is left behind and reported as not finished.
  const bounded = async (step: string, work: () => unknown): Promise<void> => {
    const p = Promise.resolve().then(work);
    const end = await Promise.race([p, d.overrun, left]);
    if (end !== OVERRAN && end !== LEFT) return;
    p.catch(() => undefined); // settles later, unheard
    if (end === OVERRAN) failures.push({ step, error: new Error(`did not finish: ${(d.expired as TimeoutError).message}; it ignored its signal and was left running`) });
  };
  /**
   * Whether `step` is not to run: past the deadline, or after a failure of the scope (an illegal
   * call), it is reported as not run; after a halt (a lost lease, the end of the worker's grace
   * period) it is left to the next run.
   */
  const skipped = (step: string): boolean => {
    const why = d.expired ?? fatalOf(run.state);
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
        const what = cancel ? 'onCancel' : (h.failureLabel ?? 'onFailure');
        if (skipped(what)) continue;
        try {
          // (A handler's `onFailure` may be withdrawn meanwhile: its code did the work after all.)
          await bounded(what, () => (cancel ? h.fn({ reason: cancel.reason, signal: run.signal }) : h.onFailure?.({ signal: run.signal })));
        } catch (e) {
          failed(what, e);
        }
      }
      for (const c of compensations) {
        if (skipped(c.stepId)) continue;
        try {
          await bounded(c.stepId, () => c.undo());
        } catch (e) {
          failed(c.stepId, e);
        }
      }
    });
  } finally {
    clearTimeout(leftTimer);
    run.cleanup = { kind: 'over', ended, halt };
  }
}

/**
 * The handlers the end runs: all after a cancel; after a failure for good, those with `onFailure`.
 * A re-run's undo is no end of the task: it runs none.
 */
function handlersOf(run: RunCore, cancelled: boolean): CancelHandler[] {
  if (cancelled) return [...run.cancelHandlers];
  return undoing(run.undo, run.state) ? [] : run.cancelHandlers.filter((h) => h.onFailure);
}

/** Runs the cancel handlers and compensations that the run's end calls for; see the module doc. */
export async function runCleanup(run: RunCore, result: Settled | null): Promise<CleanupResult> {
  if (!cleanupDue(run.state, result)) return DONE;
  // Nothing registered and nothing in flight to register: nothing to clean up.
  if (!run.compensations.length && !run.undoable.size && !handlersOf(run, run.state.kind === 'cancelled').length) return DONE;
  // The code has stopped for good: its new calls are refused from now on; its calls in flight go on.
  const ended = haltOf(run.state) ?? fatalOf(run.state) ?? new Error(`Task ${run.taskId}: the run has ended`);
  run.cleanup = { kind: 'stopped', ended };
  const deadline = armCleanupDeadline(run);
  try {
    return await cleanUp(run, result, deadline, ended);
  } finally {
    deadline.dispose();
  }
}

async function cleanUp(run: RunCore, result: Settled | null, d: CleanupDeadline, ended: Error): Promise<CleanupResult> {
  const running = await settleUndoable(run, d);
  const saved = run.state;
  // A lost lease, or a worker's grace period that ended, while it waited: nothing to clean up here.
  if (!cleanupDue(saved, result)) return DONE;
  const cancel = saved.kind === 'cancelled' ? cancelOf(saved) : null;
  const handlers = handlersOf(run, cancel !== null);
  // A re-run's undo runs only the compensations of the steps it forgets (see `undo-rerun.ts`).
  const compensations = (undoing(run.undo, saved) ? compensationsToUndo(run.undo, run.compensations) : [...run.compensations]).reverse();
  // A step with a compensation still running now was not undone, and will not be: people must know.
  const bound = d.expired ? `the cleanup's ${run.cleanupMs} ms deadline` : `the ${run.deps.cancelGraceMs} ms grace period after its signal fired`;
  const failures: Array<{ step: string; error: Error }> = running.map((step) => ({
    step,
    error: new Error(`not undone: the step was still running when the cleanup began (it did not finish within ${bound}); if it completes, its effect is not undone`),
  }));
  if (!handlers.length && !compensations.length && !failures.length) return DONE;
  // The worker's grace period is over: the worker that takes the task over runs the cleanup.
  if (run.shutDown) return { failure: null, interrupted: true };

  const halt = haltOf(saved) ?? fatalOf(saved) ?? ended;
  run.compensationsRun = new Set(compensations.map((c) => c.stepId));
  await runScope(run, d, { ended, halt, cancel, handlers, compensations, failures });
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
