/**
 * @module run/task-run
 * Internal: not part of the public API (the package exports only its index modules).
 * One run of a claimed task: replays the workflow function against the task's journal, executes
 * what has no checkpoint yet, and ends the run with one lifecycle transition (complete, fail,
 * park, suspend, release or abort). This module is the orchestration: the worker's commands, the
 * run from start to end, and its last transition (decided by `decideEnd`, written by the writer).
 * Identity, order, durability and waits are described where they are kept: `identity.ts`,
 * `replay.ts`, `writer.ts`, `waits.ts`; the run's state in `state.ts`.
 *
 * Stopping. A pause or a draining worker stops new calls from starting (they do not resolve in
 * this run); when in-flight work has settled the run ends `paused` or back to `pending`. A cancel,
 * the task's deadline, or the end of the worker's grace period, fires the AbortSignal and new calls
 * reject; the run waits up to the grace period for in-flight work to settle. What a step returns
 * after its signal fired does not count (see `attempt.ts`), except for a step with a
 * compensation when the task ends with its cleanup: it is checkpointed, and compensated. A lost
 * lease (or a database that stays away) stops the run without writing anything more.
 */
import { getEventListeners } from 'node:events';
import { LeaseLostError, TaskCancelledError, WorkerStoppingError, coerceError } from '../errors.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { ClaimedTask, StepRow } from '../store.ts';
import { scheduleIdleCheck } from './activity.ts';
import { RunCore, type RunDefinition, type RunDeps, type RunParts } from './core.ts';
import { Replay } from './replay.ts';
import { JournalWriter } from './writer.ts';
import { ProgressReporter } from './progress.ts';
import { who } from './identity.ts';
import { decideEnd, type Settled } from './outcome.ts';
import { armDeadline, deadlinePassed, disarmed } from './deadline.ts';
import { failedOutside } from './failed-outside.ts';
import { startUndo, undoEnd, undoing } from './undo-rerun.ts';
import { cleanupDue, runCleanup, type CleanupResult } from './cleanup.ts';
import { inScope } from './cleanup-scope.ts';
import { mayKeep, resumesFromPark } from './resume.ts';
import { cancelOf, haltOf, isLeaseLost, withCancel, withDrain, withEnd, withLeaseLost, withPause, withShutdown, withoutPause, type RunState } from './state.ts';

export type { RunDefinition, RunDeps } from './core.ts';

/** The kernel's modules behind a run's parts. */
const PARTS: RunParts = {
  replay: (run, steps) => new Replay(run, steps),
  writer: (run) => new JournalWriter(run),
  progress: (run) => new ProgressReporter(run),
  checkIdle: scheduleIdleCheck,
};

export class TaskRun {
  readonly taskId: string;
  readonly workflow: RunDefinition;
  readonly #run: RunCore;
  /** How the workflow function settled, once it has. */
  #result: Settled | null = null;
  /** The run parked and may be resumed in memory (see `resume.ts`). */
  #kept = false;

  constructor(claimed: ClaimedTask, workflow: RunDefinition, deps: RunDeps) {
    this.taskId = claimed.task.id;
    this.workflow = workflow;
    this.#run = new RunCore(claimed, workflow, deps, PARTS);
    if (claimed.task.status === 'cancelling') this.cancel(claimed.task.cancelReason ?? undefined);
    if (claimed.task.pauseRequested) this.#run.state = withPause(this.#run.state);
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  /** The fencing epoch of the run's lease. */
  get epoch(): number {
    return this.#run.epoch;
  }

  /** The run's code and cleanup are over: only its last write may be left (or it parked and is kept). */
  get ended(): boolean {
    return this.#run.ended;
  }

  /** The run parked and is kept: the worker may resume it (see {@link resume}) or drop it ({@link discard}). */
  get kept(): boolean {
    return this.#kept;
  }

  /** Whether `claimed` may take up this kept run where it parked (see `resume.ts`). */
  resumable(claimed: ClaimedTask): boolean {
    return this.#kept && resumesFromPark(this.#run, claimed, this.#run.deps.clock.now());
  }

  /**
   * Takes up the kept run under `claimed` (which {@link resumable} accepted), with the worker's
   * services for that claim: its waits end if their signals came or their deadlines passed, and
   * the run goes on from there. Never throws.
   */
  resume(claimed: ClaimedTask, deps: RunDeps): Promise<TaskStatus | 'lease-lost'> {
    const run = this.#run;
    this.#kept = false;
    run.rearm(claimed, deps);
    // A wait whose signal came ends now; the others arm their deadlines again.
    const sent = signalNames(run);
    for (const wait of [...run.waits.values()]) {
      if (wait.wake && wait.events.some((e) => sent.has(e))) wait.wake();
      else wait.rearm?.();
    }
    scheduleIdleCheck(run);
    return this.#drive(false);
  }

  /** The kept run will not be resumed: what its end would have told its steps, they are told now. */
  discard(): void {
    if (!this.#kept) return;
    this.#kept = false;
    this.#abortLeftovers();
  }

  // --- commands from the worker ---------------------------------------------------------------

  /**
   * News that a signal was sent to the task (in this process, or announced by another): event
   * waits of this run that it matches end now rather than at their deadline.
   */
  signalArrived(): void {
    const core = this.#run;
    if (core.ended) return;
    if (![...core.waits.values()].some((w) => w.events.length)) {
      core.signalNews = true; // the next event wait looks before it waits
      return;
    }
    core.fetchSignals().then(
      (fresh) => {
        if (!fresh || core.ended) return;
        const sent = signalNames(core);
        for (const wait of [...core.waits.values()]) {
          if (wait.wake && wait.events.some((e) => sent.has(e))) wait.wake();
        }
      },
      () => undefined,
    ); // the store is away: the wait's deadline looks again
  }

  /** The task was cancelled: fire the signal; the run ends `cancelled` after its cleanup (`failed` if that fails for good). */
  cancel(reason: string | undefined): void {
    const run = this.#run;
    if (cancelOf(run.state) || inScope(run.cleanup)) return;
    // After a re-run's undo, whose scope ran only some compensations, this run does not end
    // cancelled: its end finds the task cancelling and hands it over to a run that undoes the rest.
    if (run.undo && run.cleanup.kind === 'over') return;
    run.setState(withCancel(run.state, reason, () => new TaskCancelledError(this.taskId, reason)));
  }

  /** The run gave up its lease ({@link loseLease}): it writes nothing more, and its lease is not to be renewed. */
  get leaseLost(): boolean {
    return isLeaseLost(this.#run.state);
  }

  /** Another worker owns the task now (or may, any moment): stop at once, write nothing. */
  loseLease(): void {
    const run = this.#run;
    run.setState(withLeaseLost(run.state, () => new LeaseLostError(this.taskId, this.epoch)));
    run.replay.abandon();
  }

  /** Start no new call; end `paused` once in-flight work has settled (not during the cleanup scope). */
  requestPause(): void {
    const run = this.#run;
    if (inScope(run.cleanup)) return;
    const next = withPause(run.state);
    if (next === run.state) return;
    run.state = next;
    scheduleIdleCheck(run);
  }

  /** The pause request was withdrawn before the run honoured it. */
  withdrawPause(): void {
    this.#run.state = withoutPause(this.#run.state);
  }

  /**
   * The worker is stopping: start no new call; hand the task back once in-flight work settled.
   * The cleanup scope goes on (until the grace period ends: see {@link abortForShutdown}).
   */
  drain(): void {
    if (inScope(this.#run.cleanup)) return;
    this.#run.state = withDrain(this.#run.state);
    scheduleIdleCheck(this.#run);
  }

  /** The worker's grace period is over: fire the signal; the task goes back to pending. */
  abortForShutdown(): void {
    const run = this.#run;
    run.shutDown = true;
    run.setState(withShutdown(run.state, () => new WorkerStoppingError()));
  }

  /**
   * @internal For the crash simulation of `stepwise-engine/testing` only (see `Worker.abandon`):
   * the worker's process is taken to have died. No step function starts and none that is running
   * reaches the code, recorded results are no longer handed back, and the run's timers stop.
   * Nothing is written and nothing is signalled (a dead process tells its steps nothing); the
   * lease is left behind. What is already awaiting the store stays pending: the checker's store
   * answers nothing once its process is dead.
   */
  abandon(): void {
    const run = this.#run;
    this.#kept = false;
    run.abandoned = true;
    run.replay.stop();
    run.progress.stop();
    run.waitTimers?.abort(null);
  }

  // --- the run ----------------------------------------------------------------------------------

  /** Runs the workflow until it finishes or can only wait, and writes the outcome. Never throws. */
  execute(): Promise<TaskStatus | 'lease-lost'> {
    const run = this.#run;
    // A re-run's undo (see undo-rerun.ts), a task past its deadline, or one failed from outside (see
    // failed-outside.ts): the run fails at once; its code replays what it recorded (its compensations
    // are registered as it receives its steps' outputs) and makes no new call. Before the deadline,
    // a timer fails it then.
    const expired = startUndo(run) || failedOutside(run) || deadlinePassed(run);
    // The code starts on the next microtask, once the replay has started and the driver has reached its first wait.
    queueMicrotask(this.#startCode.bind(this));
    run.replay.start();
    return this.#drive(expired);
  }

  /**
   * Runs the workflow's code; its outcome is kept in `#result` and wakes the driver. Bound
   * methods, not closures or an async frame per run: a run in flight holds what its code's
   * continuation holds, and a young collection copies that for every run in flight.
   */
  #startCode(): void {
    let code: Promise<unknown>;
    try {
      code = Promise.resolve(this.#run.deps.runCode(this.#run));
    } catch (error) {
      this.#codeThrew(error);
      return;
    }
    void code.then(this.#codeReturned.bind(this), this.#codeThrew.bind(this));
  }

  #codeReturned(value: unknown): void {
    this.#result = { ok: true, value };
    this.#run.driver.wake();
  }

  #codeThrew(error: unknown): void {
    this.#result = { ok: false, error };
    this.#run.driver.wake();
  }

  /** Drives the run's code (started, or resumed) until it finishes or can only wait, and writes the outcome. */
  async #drive(expired: boolean): Promise<TaskStatus | 'lease-lost'> {
    const run = this.#run;
    const disarm = expired ? disarmed : armDeadline(run);
    // One grace period from the halt, for the function and its live work together.
    let graceEnds = Infinity;
    // Until the code settles or the run can only wait; after a halt, for the grace period at most.
    // The driver goes on a turn after its wake, so the code's continuations queued by then run
    // first: a run that failed at its start is idle already, and its code's first turns still
    // register their handlers (an onCancel after a plain await) before the cleanup looks for them.
    if (this.#result === null) await run.driver.promise.then();
    if (this.#result === null && !run.driver.idle && run.driver.halted) await this.#grace((graceEnds = Date.now() + run.deps.cancelGraceMs));
    // After a halt or the task's deadline (the signal fired), live work gets the grace period to settle.
    if (haltOf(run.state) || run.aborted) await this.#settleLive(Number.isFinite(graceEnds) ? graceEnds : Date.now() + run.deps.cancelGraceMs);
    disarm();
    // Cancel handlers and compensations, when the run ends cancelled or failed for good. First the
    // code receives the results it recorded and asks for (a resumed run), as the first run's code
    // had: compensations are registered as it receives its steps' outputs.
    let cleanup: CleanupResult = { failure: null, interrupted: false };
    let unreached: StepRow | undefined;
    try {
      if (cleanupDue(run.state, this.#result) && run.replay.pending) await run.replay.whenStuck();
      // The first recorded call the code did not make (an undo cannot register its compensation).
      unreached = run.replay.expected();
      cleanup = await runCleanup(run, this.#result);
    } catch (e) {
      run.deps.emit('worker:error', { error: coerceError(e), during: `cleaning up task ${this.taskId}` });
    }
    // The end is decided on the state as it stands now, before the run is marked ended.
    const state = run.state;
    run.state = withEnd(state);
    run.progress.stop();
    run.waitTimers?.abort(null);
    run.replay.stop();
    try {
      const status = await this.#finish(state, this.#result, cleanup, unreached);
      this.#kept = status === 'waiting' && run.deps.keepParked === true && mayKeep(run, state);
      return status;
    } catch (e) {
      // The outcome could not be written (database unreachable): the lease will expire and the
      // task will be resumed from its last checkpoint by whichever worker claims it.
      run.deps.emit('worker:error', { error: coerceError(e), during: `finishing task ${this.taskId}` });
      return 'lease-lost';
    } finally {
      if (!this.#kept) this.#abortLeftovers();
    }
  }

  /**
   * Steps still running after the workflow returned (the losers of a race) are told to stop.
   * (Nothing to tell when no step is running and nobody listens directly: no abort event to
   * dispatch. A signal derived with AbortSignal.any from a step that has already returned is
   * not told: work a step leaves behind after returning is its own.)
   */
  #abortLeftovers(): void {
    const run = this.#run;
    if (!run.aborted && (run.attempting || (run.controller && getEventListeners(run.controller.signal, 'abort').length))) {
      run.abortRun(new Error(`Task ${this.taskId}: the run has ended`));
    }
  }

  /**
   * After a halt, give the function until `deadline` (the halt plus `cancelGraceMs`) to settle.
   * Real time, not the engine's clock: this bounds how long a worker slot stays busy, whatever
   * time the workflow lives in.
   */
  async #grace(deadline: number): Promise<void> {
    const run = this.#run;
    run.driver.renew();
    const timer = setTimeout(() => run.driver.wake(), Math.max(0, deadline - Date.now()));
    await run.driver.promise;
    clearTimeout(timer);
  }

  /** After a halt, wait (within the same grace period) for live work to notice its signal. */
  async #settleLive(deadline: number): Promise<void> {
    while (this.#run.live > 0 && Date.now() < deadline) await this.#run.nextChange(deadline - Date.now());
  }

  async #finish(state: RunState, result: Settled | null, cleanup: CleanupResult, unreached: StepRow | undefined): Promise<TaskStatus | 'lease-lost'> {
    const run = this.#run;
    // The worker stopped in the middle of the cleanup: the task keeps its status; the worker that
    // takes it over once its lease has expired resumes the cleanup (see `cleanup.ts`).
    if (cleanup.interrupted && state.kind !== 'lost') {
      await run.writer.settle();
      return cancelOf(state) ? 'cancelling' : 'running';
    }
    // A re-run's undo whose compensations all completed: the task runs again from its step.
    if (!cleanup.failure && undoing(run.undo, state)) {
      await run.writer.settle();
      const rows = await run.deps.store.getSteps(this.taskId);
      return run.writer.end(undoEnd(run.undo, { taskId: this.taskId, task: run.task, compensations: run.compensations, who: who(run) }, rows, unreached));
    }
    const plan = decideEnd(state, {
      result,
      refused: run.refused,
      waits: [...run.waits.values()],
      journal: run.journal,
      calls: run.seq,
      taskId: this.taskId,
      workflowName: this.workflow.name,
      who: who(run),
      outputBytes: run.deps.outputBytes,
      deadline: run.deadline,
      cleanupFailure: cleanup.failure,
    });
    // A re-run's undo that ended otherwise (a failed compensation, a cancel) is over all the same.
    if (plan !== 'lease-lost') return run.writer.end(run.undo ? { ...plan, set: { ...plan.set, undoFrom: null } } : plan);
    // A database that stayed away: writes already started settle first, as before a last write.
    if (state.kind === 'lost' && state.by === 'store') await run.writer.settle();
    return run.writer.lost();
  }
}

/** The names of the signals the run holds and has not consumed (a fan-in waits on a thousand of them). */
function signalNames(run: RunCore): Set<string> {
  return new Set(run.signals.map((s) => s.name));
}
