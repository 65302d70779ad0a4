/**
 * @module run/core
 * Internal: not part of the public API (the package exports only its index modules).
 * The state one run's modules share: the claimed task and the worker's services, the run's state
 * (see `state.ts`), its live-activity counters and registered waits, its journal positions, its
 * AbortSignal, and its replay and writer. Plain fields read and written by the kernel's modules
 * (a step is a hot path: no layer between them); the few operations here are the ones that change
 * the state and must tell everyone (the signal, the attempts in progress, the waiting run). The
 * layer above sees a run as a {@link Run} (`run.ts`): read-only facts and the operations below.
 * The replay, the writer and the progress reporter are made by `task-run.ts` ({@link RunParts}),
 * so that this module knows them only by what they offer.
 */
import { setMaxListeners } from 'node:events';
import { resolveRetry, type RetryPolicy } from '../retry.ts';
import { toMs } from '../duration.ts';
import { DriverWake } from './driver-wake.ts';
import { CLEANUP_SEQ, CODE_RUNNING, DEFAULT_CLEANUP_MS, isCleanupSeq, type CancelHandler, type CleanupPhase, type Compensation } from './cleanup-scope.ts';
import type { ClaimedTask, SignalRow, StepRow, TaskRow } from '../store.ts';
import { RUNNING, haltOf, hasEnded, withFatal, withLeaseLost, withStoreLost, type RunState } from './state.ts';
import type { Wait } from './outcome.ts';
import { undoOf, type UndoRerun } from './undo-rerun.ts';
import type { ProgressPart, ReplayPart, Run, RunDefinition, RunDeps, WriterPart } from './run.ts';

export type { Consume, ProgressPart, ReplayPart, Run, RunDefinition, RunDeps, RunOptions, RunServices, WriterPart } from './run.ts';

/** How a run's parts are made (`task-run.ts` wires the kernel's modules in). */
export interface RunParts {
  replay(run: RunCore, steps: readonly StepRow[]): ReplayPart;
  writer(run: RunCore): WriterPart;
  progress(run: RunCore): ProgressPart;
  /** Looks, soon, whether the run can only wait (`activity.ts`). */
  checkIdle(run: RunCore): void;
}

const NO_ROWS: ReadonlyMap<number, StepRow> = new Map();
const NO_WAITS: ReadonlyMap<number, Wait> = new Map();
const NO_STEPS: ReadonlySet<string> = new Set();

export class RunCore implements Run {
  readonly taskId: string;
  /** The fencing epoch of the run's lease (a new one when a parked run is resumed: see {@link rearm}). */
  epoch: number;
  readonly workflow: RunDefinition;
  task: TaskRow;
  deps: RunDeps;
  readonly defaultRetry: RetryPolicy;
  /** When the task must be finished (ms), or null (see `failure/deadline.ts`). */
  readonly deadline: number | null;
  /** The re-run's undo this run carries out, or null (see `undo-rerun.ts`). */
  readonly undo: UndoRerun | null;

  /** How the run stands (see `state.ts`); changed through {@link setState} when it may halt. */
  state: RunState = RUNNING;
  /** Calls refused because of a pause or a drain: the run cannot finish in this run any more. */
  refused = 0;

  // Identity (see `identity.ts`; the cleanup's in `cleanup-scope.ts`).
  /** The code's journal rows, by position (as claimed: a first run has none). */
  readonly journal: ReadonlyMap<number, StepRow>;
  /** The next free position of the cleanup scope. */
  cleanupSeq = CLEANUP_SEQ;
  // Made at their first write, like the other collections of the accessors below.
  #cleanupJournal: Map<string, StepRow> | null = null;
  #cleanupOccurrences: Map<string, number> | null = null;
  /** The next position. */
  seq = 0;
  /**
   * Code positions from here on hold no journal row the run knows of (none was loaded there, none
   * written yet): their first write may be a plain insert (`StepWrite.fresh`).
   */
  freshFrom = 0;
  /** Per position: the `done` of the last result the code had received when it made the call. */
  readonly calledAfter = new Map<number, number>();
  /** Per position of a step with a business key: that key (`v<keyVersion>:<key>`), kept on its rows. */
  #businessKeys: Map<number, string> | null = null;
  readonly occurrences = new Map<string, number>();
  /** Signals sent to the task and not consumed yet. */
  readonly signals: SignalRow[];
  /** The newest signal id this run knows of (given at claim, or fetched since). */
  lastSignalId: number;
  /** News of a signal arrived that no wait has fetched yet. */
  signalNews = false;
  /** A fetch of new signals in progress (one at a time). */
  #fetching: Promise<boolean> | null = null;

  // Activity and waits (see `activity.ts`, `waits.ts`).
  /** Live work in progress: step attempts, checkpoints, in-process sleeps, results waiting for their turn. */
  live = 0;
  /** Of `live`: results that are ready and only wait for the replay to reach them. */
  gated = 0;
  /** Bumped by every call and every hand-over: the code is not quiet while it moves. */
  activity = 0;
  idleCheckScheduled = false;
  #waits: Map<number, Wait> | null = null;
  /** Ends the in-process timers of waits when the run ends. */
  waitTimers: AbortController | null = null;
  /** What ends the wait of the run's driver (`TaskRun`): idle, a halt, the code's end. */
  readonly driver = new DriverWake();
  #changeWaiters: Set<() => void> | null = null;

  /**
   * The run's AbortSignal, made when first asked for. At the end of a run it is fired only if a
   * step is still running or someone listens: an abort event costs more than a step, and most
   * runs end with nobody to tell. `aborted` / `abortReason` are the truth.
   */
  controller: AbortController | null = null;
  aborted = false;
  abortReason: unknown;
  /** Attempts with a timeout in progress (they listen on their own signal). */
  timedAttempts = 0;
  /** Abort handlers of the attempts in progress (without a timeout): called when the run aborts. An array: see small-lists.ts. */
  readonly attemptAborts: Array<{ handleEvent(): void }> = [];

  /** Whether a step attempt of this run is in progress (with a timeout or without). */
  get attempting(): boolean {
    return this.attemptAborts.length > 0 || this.timedAttempts > 0;
  }

  // The collections most runs never write are made at their first write: hundreds of runs are in
  // flight at once, and what a run holds is what the garbage collector copies while it lives.

  /** The cleanup scope's journal rows, by step id. */
  get cleanupJournal(): Map<string, StepRow> {
    return (this.#cleanupJournal ??= new Map());
  }
  /** How often each name was called in the cleanup scope. */
  get cleanupOccurrences(): Map<string, number> {
    return (this.#cleanupOccurrences ??= new Map());
  }
  /** The waits the task may park on, by position (see `waits.ts`). */
  get waits(): ReadonlyMap<number, Wait> {
    return this.#waits ?? NO_WAITS;
  }
  setWait(wait: Wait): void {
    (this.#waits ??= new Map()).set(wait.row.seq, wait);
  }
  deleteWait(seq: number): void {
    this.#waits?.delete(seq);
  }

  /** Compensations of completed steps, in the order the code received them (`cleanup.ts`). */
  readonly compensations: Compensation[] = [];
  #undoable: Set<string> | null = null;
  /**
   * The code's steps with a compensation whose attempt is running, or whose result is on its way
   * to the code (by step id): the cleanup waits for them before it begins (see `cleanup.ts`).
   */
  get undoable(): ReadonlySet<string> {
    return this.#undoable ?? NO_STEPS;
  }
  /** The steps whose compensation the cleanup scope ran (or reported as not run), once it began. */
  compensationsRun: ReadonlySet<string> | null = null;
  /** `ctx.onCancel` handlers, in registration order. */
  readonly cancelHandlers: CancelHandler[] = [];
  /** Where the run is in its cleanup (see `cleanup-scope.ts`). */
  cleanup: CleanupPhase = CODE_RUNNING;
  /** How long the cleanup scope may take. */
  readonly cleanupMs: number;
  /** The worker's grace period is over: a cleanup not begun yet is left to the next worker. */
  shutDown = false;
  /**
   * @internal The worker's process is taken to have died (`TaskRun.abandon`, for the crash
   * simulation of `stepwise-engine/testing`): no step function starts, none that is running reaches
   * the code, and the replay hands back nothing more.
   */
  abandoned = false;

  readonly replay: ReplayPart;
  readonly writer: WriterPart;
  readonly progress: ProgressPart;
  readonly #checkIdle: (run: RunCore) => void;

  constructor(claimed: ClaimedTask, workflow: RunDefinition, deps: RunDeps, parts: RunParts) {
    this.task = claimed.task;
    this.taskId = claimed.task.id;
    this.epoch = claimed.task.epoch;
    this.workflow = workflow;
    this.deps = deps;
    let journal: Map<number, StepRow> | null = null;
    for (const s of claimed.steps) {
      if (!isCleanupSeq(s.seq)) {
        (journal ??= new Map()).set(s.seq, s);
        this.freshFrom = Math.max(this.freshFrom, s.seq + 1);
      } else {
        this.cleanupJournal.set(s.name, s);
        this.cleanupSeq = Math.max(this.cleanupSeq, s.seq + 1);
      }
    }
    this.journal = journal ?? NO_ROWS;
    this.undo = undoOf(claimed.task, this.journal);
    this.signals = [...claimed.signals];
    this.lastSignalId = claimed.signals.reduce((max, s) => Math.max(max, s.id), 0);
    this.defaultRetry = resolveRetry(workflow.options.retry);
    // A task started without its definition at hand (the CLI) gets the workflow's timeout here; a
    // retried task has only the deadline its retry left it.
    const byTimeout = workflow.options.timeout === undefined || claimed.task.retries > 0 ? null : claimed.task.createdAt + toMs(workflow.options.timeout);
    const stored = claimed.task.deadlineAt ?? null;
    this.deadline = stored === null ? byTimeout : byTimeout === null ? stored : Math.min(stored, byTimeout);
    this.cleanupMs = workflow.options.cleanupTimeout === undefined ? DEFAULT_CLEANUP_MS : toMs(workflow.options.cleanupTimeout);
    this.#checkIdle = parts.checkIdle;
    this.replay = parts.replay(this, claimed.steps);
    this.writer = parts.writer(this);
    this.progress = parts.progress(this);
  }

  /** The run can only wait, or was asked to stop and is quiet: its driver ends it. */
  signalIdle(): void {
    this.driver.becameIdle();
  }

  /**
   * Takes the run up again under a new claim, after it parked and was kept in memory (see
   * `resume.ts`): the new lease's epoch and task row, the worker's services for it, the signals not
   * consumed yet, and a run state as at a start. What the code built is kept: its positions,
   * occurrences, compensations, handlers and waits, as a replay would have rebuilt them.
   */
  rearm(claimed: ClaimedTask, deps: RunDeps): void {
    this.task = claimed.task;
    this.epoch = claimed.task.epoch;
    this.deps = deps;
    this.state = RUNNING;
    this.idleCheckScheduled = false;
    this.waitTimers = null;
    this.driver.reset();
    this.signals.splice(0, this.signals.length, ...claimed.signals);
    this.lastSignalId = claimed.signals.reduce((max, s) => Math.max(max, s.id), this.lastSignalId);
    this.signalNews = false;
    // The park wrote the waits' rows: every position the code has taken may hold one now.
    this.freshFrom = Math.max(this.freshFrom, this.seq);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      setMaxListeners(0, this.controller.signal); // steps with a timeout listen on it
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  /**
   * Wakes the waits of {@link nextChange}: called when live work or a compensable step settles, the
   * state moves, or something aborts the run (the cleanup's deadline, too, after a cancel).
   */
  changed(): void {
    const waiting = this.#changeWaiters;
    if (!waiting?.size) return;
    this.#changeWaiters = null;
    for (const wake of waiting) wake();
  }

  /** Resolves at the next {@link changed}, or after `ms` (a wait for in-flight work to settle, with its bound). */
  nextChange(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.#changeWaiters?.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, Math.min(Math.max(0, ms), 2 ** 31 - 1));
      (this.#changeWaiters ??= new Set()).add(wake);
    });
  }

  // --- operations of the layer above (see `Run` in `run.ts`) ---------------------------------

  takeSignal(index: number): SignalRow {
    return this.signals.splice(index, 1)[0] as SignalRow;
  }

  refuse(): void {
    this.refused++;
  }

  lose(by: 'lease' | 'store', halt: () => Error): void {
    this.setState(by === 'lease' ? withLeaseLost(this.state, halt) : withStoreLost(this.state, halt));
  }

  occurrence(name: string): number {
    return this.occurrences.get(name) ?? 1;
  }

  nextRecorded(): StepRow | undefined {
    return this.journal.get(this.seq);
  }

  recordedRows(): Iterable<StepRow> {
    return this.journal.values();
  }

  keyCall(seq: number, key: string): void {
    (this.#businessKeys ??= new Map()).set(seq, key);
  }

  /** The business key of the step at position `seq`, or null (see {@link keyCall}). */
  businessKeyOf(seq: number): string | null {
    return this.#businessKeys?.get(seq) ?? null;
  }

  registerCompensation(c: Compensation): void {
    this.compensations.push(c);
  }

  registerCancelHandler(h: CancelHandler): void {
    this.cancelHandlers.push(h);
  }

  trackUndoable(stepId: string): void {
    (this.#undoable ??= new Set()).add(stepId);
  }

  /** A step in {@link undoable} failed, or the code received its output (its compensation is registered). */
  settledUndoable(stepId: string): void {
    if (this.#undoable?.delete(stepId)) this.changed();
  }

  /** Fires the run's signal (if anyone asked for it) and stops the attempts in progress. */
  abortRun(reason: unknown): void {
    this.changed();
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
    for (const a of [...this.attemptAborts]) a.handleEvent();
  }

  /** Moves to `next`; at the first halt, fires the signal with its error and wakes the waiting run. */
  setState(next: RunState): void {
    const first = haltOf(this.state) === null ? haltOf(next) : null;
    this.state = next;
    this.changed();
    if (first) {
      this.abortRun(first);
      this.driver.haltedNow();
    }
  }

  /** Marks the run as failed for good, whatever the workflow code does with the error. */
  fail(error: Error): Error {
    this.state = withFatal(this.state, error);
    this.#checkIdle(this);
    this.signalIdle();
    return error;
  }

  /**
   * Reads signals sent since the run started (or last looked) into `signals`; true if there were
   * any. A signal sent while the run is going is not in the claim: it is found here, when news of
   * it arrives (`TaskRun.signalArrived`) or when an event wait's deadline comes.
   */
  fetchSignals(): Promise<boolean> {
    this.signalNews = false;
    const before = this.#fetching;
    // A read under way may have run before this news was committed: read again once it has ended.
    if (before) return before.catch(() => false).then((fresh) => this.#fetch().then((more) => fresh || more));
    return this.#fetch();
  }

  #fetch(): Promise<boolean> {
    const fetching: Promise<boolean> = this.deps.store.pendingSignals(this.taskId, this.lastSignalId).then(
      (fresh) => {
        if (this.#fetching === fetching) this.#fetching = null;
        // Only signals newer than any the run knows of now: a read that began before a resume
        // (`rearm`) may return signals the new claim already handed over.
        const known = this.lastSignalId;
        const added = fresh.filter((s) => s.id > known);
        for (const s of added) this.signals.push(s);
        if (added.length) this.lastSignalId = Math.max(...added.map((s) => s.id));
        return added.length > 0;
      },
      (e: unknown) => {
        if (this.#fetching === fetching) this.#fetching = null;
        throw e;
      },
    );
    this.#fetching = fetching;
    return fetching;
  }

  /** No new call may start: a pause, a drain, or the end of the run. */
  blocked(): boolean {
    return this.state.hold !== 'none';
  }

  /** The code's run is over (see `hasEnded`). */
  get ended(): boolean {
    return hasEnded(this.state);
  }
}

/** The kernel's own view of a run the layer above hands back (every `Run` is made by the kernel). */
export function coreOf(run: Run): RunCore {
  return run as RunCore;
}
