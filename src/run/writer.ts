/**
 * @module run/writer
 * Internal: not part of the public API (the package exports only its index modules).
 * The run's writes: journal rows (fenced by the run's epoch) and the last transition.
 *
 * Durability. A result's journal row is written before the run's next side effect (any step
 * attempt waits for it), or with the run's last transition, or one turn after its hand-over at
 * the latest: workflow code between steps has no effects, and a crash before the write only
 * replays that call again. So a task's final step shares the write that completes the task.
 *
 * A write the fence refuses means the lease is lost; a database that does not answer is
 * retried while the lease is surely still ours (then the run stops, writing nothing more). A
 * write the database refuses for its content (STORE_REFUSED: a value it cannot hold, a
 * constraint) is never retried: it fails the run, and the task fails with that error.
 */
import { ERROR_CODES, LeaseLostError, StoreRefusedError, StoreUnavailableError, coerceError, isStepwiseError, type StepwiseError } from '../errors.ts';
import { encodeError } from '../serialize.ts';
import type { LifecycleEvent, TaskStatus } from '../lifecycle.ts';
import type { StepRow, StepWrite, TaskHead, TaskRow, TransitionWrite } from '../store.ts';
import { planTransition, wakeFor } from '../transitions.ts';
import type { Consume, RunCore } from './core.ts';
import type { EndPlan } from './outcome.ts';
import { isCleanupSeq } from './cleanup-scope.ts';
import { nextTurn } from './turns.ts';
import { cancelOf, haltReason, mayWrite, withLeaseLost, withStoreLost } from './state.ts';
import { removeItem } from '../small-lists.ts';

/** A consumed signal: written with the row of the call that received it. */

/** A result handed (or about to be handed) to the code whose journal row is not written yet. */
interface Deferred {
  row: StepRow;
  consume: Consume | undefined;
  /** Called once the row is durable; it must not throw (it runs in the write's reaction, whose promise nobody awaits). */
  onDurable: (() => void) | undefined;
}

/** Waits this long between attempts of a write the database did not answer. */
const RETRY_MS = 500;

export class JournalWriter {
  readonly #run: RunCore;
  /**
   * Results already handed to the code whose journal rows are not written yet. They are written
   * before the run's next side effect (a step attempt, a journal write), with the run's last
   * transition (so the final step of a task costs no write of its own), or one turn after their
   * hand-over at the latest.
   */
  #handed: Deferred[] = [];
  /** Results recorded and not handed to the code yet, in `done` order (see `#handed`; an array: see small-lists.ts). */
  #unhanded: Deferred[] = [];
  /** Writes of deferred rows in progress (settles when all of them have). */
  #writes: Promise<unknown> = Promise.resolve();
  #writesPending = 0;
  /** A turn that writes the rows of results handed over is scheduled. */
  #flushTurn = false;

  constructor(run: RunCore) {
    this.#run = run;
  }

  /** Whether a failed write may be tried again: the lease is surely still ours and the run may write. */
  #mayRetry(): boolean {
    const run = this.#run;
    return run.deps.clock.now() < run.deps.leaseSafeUntil() && mayWrite(run.state);
  }

  /**
   * Records a result for the code (with its `done`) and hands it over in order. Its row is
   * written later (see `#handed`): nothing the code does before its next side effect is
   * observable, and a crash before the write replays the result's call, which is deterministic.
   */
  complete<T>(row: StepRow, value: () => T, consume?: Consume, onDurable?: () => void): Promise<T> {
    const run = this.#run;
    // The row is the caller's own, made for this result (journalRow): completed in place. A row
    // begun before a park is this run's row once the run was resumed (see `resume.ts`).
    row.done = run.replay.nextDone();
    row.epoch = run.epoch;
    const done = row.done;
    const entry: Deferred = { row, consume, onDurable };
    this.#unhanded.push(entry);
    // Bound methods, not closures made per result (see resolvers.ts).
    return run.replay.inOrder(value, done, this.#handedOver.bind(this, entry), isCleanupSeq(row.seq));
  }

  /** The code has `entry`'s result: its row is written a turn later, with the others handed over by then. */
  #handedOver(entry: Deferred): void {
    if (removeItem(this.#unhanded, entry)) this.#handed.push(entry);
    if (this.#flushTurn) return;
    this.#flushTurn = true;
    nextTurn(this.#flushHanded.bind(this));
  }

  #flushHanded(): void {
    this.#flushTurn = false;
    void this.flush(true).catch(ignore);
  }

  /** The write of `batch` committed: their rows are durable. */
  #written(batch: Deferred[]): void {
    this.#writesPending--;
    for (const d of batch) d.onDurable?.();
  }

  #writeFailed(): void {
    this.#writesPending--;
  }

  /**
   * Writes the deferred rows (with `handedOnly`, those the code has received: a result still
   * waiting for its turn may yet go with the last transition); resolves when every row written so
   * far is durable. Once the last transition is being prepared, rows wait for it.
   */
  flush(handedOnly = false): Promise<unknown> {
    if ((this.#handed.length || this.#unhanded.length) && mayWrite(this.#run.state) && !this.#run.ended) {
      const batch = handedOnly ? this.#handed : this.#takeDeferred();
      if (handedOnly) this.#handed = [];
      if (batch.length) {
        const only = batch.length === 1 ? (batch[0] as Deferred) : null;
        const written = only ? this.checkpoint(only.row, only.consume) : Promise.all(batch.map((d) => this.checkpoint(d.row, d.consume)));
        // Its first reaction: the rows are reported durable before anyone waiting on the flush resumes.
        written.then(this.#written.bind(this, batch), this.#writeFailed.bind(this));
        // Earlier writes all settled: this one alone is what is in progress.
        this.#writes = this.#writesPending++ === 0 ? written : Promise.all([this.#writes, written]);
      }
    }
    return this.#writes;
  }

  /** Every result whose row is not written yet, handed or not, in `done` order; none is left. */
  #takeDeferred(): Deferred[] {
    const all = this.#handed;
    this.#handed = [];
    if (this.#unhanded.length) {
      for (const d of this.#unhanded) all.push(d);
      this.#unhanded.length = 0;
    }
    return all;
  }

  /**
   * A fenced journal write. A refused write means the lease is lost. A database that does not
   * answer is retried while the lease is surely still ours; after that, the run stops.
   */
  async checkpoint(row: StepRow, consume?: Consume): Promise<void> {
    const run = this.#run;
    if (row.epoch !== run.epoch) row = { ...row, epoch: run.epoch };
    const write: StepWrite = consume ? { kind: 'step', taskId: run.taskId, epoch: run.epoch, step: row, consume } : { kind: 'step', taskId: run.taskId, epoch: run.epoch, step: row };
    if (!isCleanupSeq(row.seq) && row.seq >= run.freshFrom) {
      write.fresh = true;
      run.freshFrom = row.seq + 1;
    }
    for (;;) {
      // After a cancel or a worker stop the lease is still ours: a step that completed is recorded.
      if (!mayWrite(run.state)) throw haltReason(run.state);
      let accepted: unknown;
      try {
        accepted = await run.deps.writer.write(write);
      } catch (e) {
        if (isRefusal(e)) {
          // The same row would be refused again: the run fails with the refusal, named for its step.
          throw run.fail(
            new StoreRefusedError(`The checkpoint of ${row.kind} "${row.name}" of task ${run.taskId} was refused by the store: ${e.message}`, { cause: e, dbCode: refusalCode(e) }),
          );
        }
        if (this.#mayRetry()) {
          await new Promise((r) => setTimeout(r, RETRY_MS));
          continue;
        }
        // Not the step's fault: stop the run; the task resumes from its last checkpoint.
        run.setState(
          withStoreLost(run.state, () => new StoreUnavailableError(`Could not checkpoint ${row.kind} "${row.name}" of task ${run.taskId}: ${coerceError(e).message}`, { cause: e })),
        );
        throw haltReason(run.state);
      }
      if (!accepted) {
        run.setState(withLeaseLost(run.state, () => new LeaseLostError(run.taskId, run.epoch)));
        throw haltReason(run.state);
      }
      return;
    }
  }

  /** Resolves when every write already started has settled (it may be accepted or show the lease lost). */
  async settle(): Promise<void> {
    for (let w = this.#writes; ; w = this.#writes) {
      await w.then(
        () => undefined,
        () => undefined,
      );
      if (w === this.#writes) break;
    }
  }

  lost(): 'lease-lost' {
    const run = this.#run;
    run.deps.emit('lease:lost', { taskId: run.taskId, epoch: run.epoch });
    return 'lease-lost';
  }

  /**
   * Writes the run's last transition, fenced by the epoch; follows a concurrent cancel or pause.
   * A cancel this run's cleanup did not answer (heard after the end was decided, or committed after
   * the run last heard news, which the fence shows) ends the task `cancelled` at once when the run
   * left no cleanup to do; otherwise the task is handed over, still `cancelling`, with an expired
   * lease and the run's rows, and the run that reclaims it replays the code and runs the cleanup
   * (`ctx.onCancel` handlers, compensations of completed steps) before its `abort`.
   */
  async end(plan: EndPlan, afterRefusal = false): Promise<TaskStatus | 'lease-lost'> {
    const run = this.#run;
    // Only the last write is left: the slot may go to the next task, unless a step of this run is
    // still running (the loser of a race, told to stop once the run ends).
    if (!afterRefusal && !run.attempting) run.deps.ending?.();
    // Rows of results not yet written go with the last transition (the end of the run keeps them from
    // being written on their own), once every write already started has settled.
    await this.settle();
    if (!mayWrite(run.state)) return this.lost();
    const deferred = this.#takeDeferred();
    const rows = { results: deferred.map((d) => d.row), consume: deferred.flatMap((d) => (d.consume ? [d.consume] : [])) };
    let known: KnownTask = { status: cancelOf(run.state) ? 'cancelling' : 'running', reason: cancelOf(run.state)?.reason ?? null };
    let current = plan;
    for (let i = 0; i < 4; i++) {
      const { write, ev } = this.#planLast(current, known, rows);
      let row: TaskRow | TaskHead | null;
      try {
        row = await this.#writeLast(write);
      } catch (e) {
        if (!isRefusal(e) || afterRefusal) throw e;
        // The store refused what this end carries (an output, a journal row): the task fails with
        // the refusal instead, without them (the same write would be refused again).
        const error = new StoreRefusedError(`The end of task ${run.taskId} (${ev}) was refused by the store: ${e.message}`, { cause: e, dbCode: refusalCode(e) });
        return this.end({ event: 'fail', set: { error: encodeError(error) }, detail: { error: error.message } }, true);
      }
      if (row) {
        for (const d of deferred) d.onDurable?.();
        return row.status;
      }
      const fresh = await run.deps.store.getTask(run.taskId);
      if (fresh && appliedAlready(fresh, write)) {
        // An earlier attempt of this very write committed, but its answer was lost (a connection
        // that dropped around the commit): its retry's guard refused it. The run ended as planned.
        for (const d of deferred) d.onDurable?.();
        return fresh.status;
      }
      if (!fresh || fresh.epoch !== run.epoch || (fresh.status !== 'running' && fresh.status !== 'cancelling')) return this.lost();
      known = { status: fresh.status, reason: cancelOf(run.state)?.reason ?? fresh.cancelReason ?? null };
      current = replanForPause(current, fresh.pauseRequested);
    }
    return this.lost();
  }

  /** The write of the run's last transition, as the task was last known (see {@link end}). */
  #planLast(plan: EndPlan, known: KnownTask, rows: { results: StepRow[]; consume: Consume[] }): { write: TransitionWrite; ev: LifecycleEvent } {
    const run = this.#run;
    const { event } = plan;
    const mode = endMode(run, known.status, plan);
    const ev: LifecycleEvent = mode === 'abort' ? 'abort' : mode === 'hand-over' ? 'release' : event;
    const set = mode !== 'as-planned' ? {} : RESUMABLE_ENDS.has(ev) ? { ...plan.set, hasCleanup: cleanupOwed(run) } : plan.set;
    const detail = mode === 'as-planned' ? plan.detail : mode === 'abort' ? { reason: known.reason } : { reason: known.reason, cleanup: HAND_OVER_NOTE };
    const { write } = planTransition({
      taskId: run.taskId,
      state: { status: known.status, pauseRequested: event === 'suspend' },
      event: ev,
      guard: { epoch: run.epoch },
      at: run.deps.clock.now(),
      set,
      detail,
      workerId: run.deps.workerId,
      steps: mode === 'abort' ? rows.results : [...(plan.steps ?? []), ...rows.results],
      ...(mode === 'as-planned' && plan.deleteSteps ? { deleteSteps: plan.deleteSteps } : {}),
      consume: rows.consume,
      notify: (edge) => wakeFor(edge, run.taskId, run.workflow.name),
      parentId: run.task.parentId,
    });
    // Parking or handing back must not swallow a pause this run has not heard of yet.
    if (mode === 'as-planned' && (ev === 'park' || ev === 'release')) write.pauseRequested = false;
    // The run reads only the status of what the write answers; readers here (`result()`) the outcome.
    write.answer = run.deps.rowsHeard?.() === false ? 'head' : 'end';
    return { write, ev };
  }

  /**
   * The last transition; while the lease is surely ours a failing database is retried (results
   * the code received may travel only with this write, and giving up means running them again).
   */
  async #writeLast(write: TransitionWrite): Promise<TaskRow | TaskHead | null> {
    for (;;) {
      try {
        return (await this.#run.deps.writer.write(write)) as TaskRow | TaskHead | null;
      } catch (e) {
        if (isRefusal(e) || !this.#mayRetry()) throw e;
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }
}

/** Ends after which the task may run again (a failed one by a retry): they record {@link cleanupOwed}. */
const RESUMABLE_ENDS: ReadonlySet<LifecycleEvent> = new Set<LifecycleEvent>(['park', 'suspend', 'release', 'fail']);

/**
 * Whether a cancel of the task, once this run has ended without finishing it, has cleanup to run:
 * `ctx.onCancel` handlers registered, or compensations of completed steps that have not run yet.
 * Stored with the run's end, so that a cancel while the task waits goes through `cancelling`.
 */
function cleanupOwed(run: RunCore): boolean {
  // A re-run's undo ran only some compensations (see `undo-rerun.ts`): the others are still owed.
  return run.cancelHandlers.length > 0 || run.compensations.some((c) => !run.compensationsRun?.has(c.stepId));
}

/** The task as the run last knew it: its status, and the reason of a cancel it is in. */
interface KnownTask {
  status: TaskStatus;
  reason: string | null;
}

/** What the history of a hand-over says. */
const HAND_OVER_NOTE = 'cancelled while the run was ending: the run that takes the task over runs its onCancel handlers and compensations';

/**
 * How the last transition is written: as planned; as `abort` (a cancel this run did not clean up
 * after, with nothing to clean up); or as a hand-over of the still-cancelling task to a run that
 * cleans up. The end a cancel's cleanup decided (`abort`), and a cleanup's failure, stand.
 */
function endMode(run: RunCore, status: TaskStatus, plan: EndPlan): 'as-planned' | 'abort' | 'hand-over' {
  if (status !== 'cancelling' || plan.overridesCancel || plan.event === 'abort') return 'as-planned';
  return cleanupOwed(run) ? 'hand-over' : 'abort';
}

/** A pause that arrived meanwhile turns `park` or `release` into `suspend`; one withdrawn turns `suspend` into `release`. */
function replanForPause(plan: EndPlan, pauseRequested: boolean): EndPlan {
  if (plan.event === 'suspend' && !pauseRequested) return { ...plan, event: 'release' };
  // A re-run's undo keeps what it forgets and counts (see `undo-rerun.ts`); a park's wake-up does not apply.
  if ((plan.event === 'park' || plan.event === 'release') && pauseRequested)
    return { ...plan, event: 'suspend', set: plan.deleteSteps ? plan.set : {}, detail: { ...(plan.deleteSteps ? (plan.detail as object) : {}), reason: 'pause requested' } };
  return plan;
}

/** A write the store refused for its content: writing it again cannot succeed. */
function isRefusal(e: unknown): e is StepwiseError {
  return isStepwiseError(e, ERROR_CODES.STORE_REFUSED);
}

function refusalCode(e: unknown): string | null {
  const code = (e as { dbCode?: unknown }).dbCode;
  return typeof code === 'string' ? code : null;
}

/**
 * Whether `row` shows `write` applied: the write's target status, under the writer's epoch, at the
 * write's own time (a transition sets `updated_at` to its `at`). No other write takes a task of
 * that epoch to that status at that moment.
 */
function appliedAlready(row: TaskRow, write: TransitionWrite): boolean {
  return 'epoch' in write.guard && row.epoch === write.guard.epoch && row.status === write.to && row.updatedAt === write.at;
}

/** A write's failure is seen by whoever waits for it (`flush`, `settle`): the turn's own call ignores it. */
function ignore(): void {}
