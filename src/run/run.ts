/**
 * @module run/run
 * Internal: not part of the public API (the package exports only its index modules).
 * The kernel's contract with the layer above and with the worker: what a run shows of itself
 * ({@link Run}), what the worker hands it ({@link RunDeps}), and what it knows of a workflow
 * ({@link RunDefinition}: no code, no primitive). Features declare the options and services they
 * read on a run by merging them into {@link RunOptions} and {@link RunServices}.
 */
import type { Clock } from '../clock.ts';
import type { Emit, WorkerEventName } from '../events.ts';
import type { RetryOptions, RetryPolicy } from '../retry.ts';
import type { Duration } from '../duration.ts';
import type { SignalRow, StepRow, Store, TaskRow } from '../store.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { Progress } from '../api/step.ts';
import type { WriteBatcher } from '../write-batcher.ts';
import type { CancelHandler, CleanupPhase, Compensation } from './cleanup-scope.ts';
import type { RunState } from './state.ts';
import type { Reservation } from './hand-over.ts';
import type { EndPlan } from './outcome.ts';

/**
 * The options of a workflow the kernel reads. The primitives layer declares the ones its features
 * read on a run (merged into this interface by `workflow.ts`).
 */
export interface RunOptions {
  readonly retry?: RetryOptions | number | undefined;
  readonly timeout?: Duration | undefined;
  readonly cleanupTimeout?: Duration | undefined;
}

/** What the kernel knows of a workflow definition: its identity and its options (not its code). */
export interface RunDefinition {
  readonly name: string;
  readonly version: string;
  readonly options: Readonly<RunOptions>;
}

/**
 * The services a run's features use, beside the kernel's own (`RunDeps`): declared by the feature
 * that uses one (merged into this interface by its module), handed over by the worker.
 */
export interface RunServices {} // eslint-disable-line @typescript-eslint/no-empty-object-type

export interface RunDeps extends RunServices {
  store: Store;
  writer: WriteBatcher;
  clock: Clock;
  workerId: string;
  /** Waits (backoff, sleep) longer than this park the task instead of holding the worker slot. */
  parkAfterMs: number;
  /** After the signal fires, how long the run may take to settle before it is abandoned. */
  cancelGraceMs: number;
  /** Until when this run's lease is surely still ours (last renewal + lease − margin). */
  leaseSafeUntil: () => number;
  emit: Emit;
  /** Whether an event has listeners: step events are built only then (a step is a hot path). */
  hears: (name: WorkerEventName) => boolean;
  /**
   * Whether anything in this process listens for finished tasks (`result()` waiters, readers of
   * events, an engine that started tasks here), which take the outcome of a task as its end
   * commits: the run's last write then asks for the task's end (its head and outcome), and when
   * not for its head alone (`TransitionWrite.answer`). Absent: the end.
   */
  rowsHeard?: (() => boolean) | undefined;
  /** The largest step or task output, in bytes of JSON. */
  outputBytes: number;
  /**
   * Runs the workflow's code on the run: the layer above builds its `ctx` and calls its function
   * with the task's input (see `primitives/context.ts`). The kernel knows no primitive.
   */
  runCode: (run: Run) => Promise<unknown>;
  /** How long a replay waits for the call its journal says comes next (default `REPLAY_STALL_MS`): for tests. */
  replayStallMs?: number | undefined;
  /**
   * Called once when the run's code and cleanup are over and only its last write is left: the
   * worker may claim the next task for the slot while that write commits.
   */
  ending?: (() => void) | undefined;
  /**
   * A run that parks may be kept in memory, to be resumed where it stopped if this worker claims
   * its task next (see `resume.ts`).
   */
  keepParked?: boolean | undefined;
}

/** A signal a result consumes (an event wait's), written with its checkpoint. */
export type Consume = { signalId: number; seq: number };

/** The run's replay of its journal (`replay.ts`): recorded results handed back in their order. */
export interface ReplayPart {
  /** Recorded results are still to be handed back. */
  readonly pending: boolean;
  /** A replay turn is pending. */
  readonly scheduled: boolean;
  /** The `done` of the last result handed to the code in this run (0: none yet). */
  readonly handed: number;
  start(): void;
  stop(): void;
  abandon(): void;
  closeForCleanup(): void;
  whenStuck(): Promise<void>;
  expected(): StepRow | undefined;
  nextDone(): number;
  replayed<T>(seq: number, settle: (rec: StepRow, stepId: string) => T, rec: StepRow, stepId: string): Promise<T>;
  recalled<T>(settle: (rec: StepRow, stepId: string) => T, rec: StepRow, stepId: string): Promise<T>;
  inOrder<T>(value: () => T, done: number, afterHandOver?: () => void, cleanup?: boolean): Promise<T>;
  reserve<T>(done: number, cleanup: boolean): Reservation<T>;
}

/** The run's journal writer (`writer.ts`): checkpoints, and the run's last transition. */
export interface WriterPart {
  /** Records a result; takes `row` over (it sets its `done` and `epoch`): pass a row made for this result, never a recorded one. */
  complete<T>(row: StepRow, value: () => T, consume?: Consume, onDurable?: () => void): Promise<T>;
  flush(handedOnly?: boolean): Promise<unknown>;
  checkpoint(row: StepRow, consume?: Consume): Promise<void>;
  settle(): Promise<void>;
  lost(): 'lease-lost';
  end(plan: EndPlan, afterRefusal?: boolean): Promise<TaskStatus | 'lease-lost'>;
}

/** The run's progress reports (`progress.ts`). */
export interface ProgressPart {
  report(step: string | null, p: Progress): void;
  stop(): void;
}

/**
 * What the layer above (the ctx primitives, the features) sees of a run: facts, read-only; the
 * parts it writes through; and the kernel's operations. Nothing else of a run's state is theirs to
 * change: a call goes through the kernel's functions (`call`, `attempt`, `journalRow`, `waitFor`,
 * `holdFor`, `pauseUntil`, `parked`), which take a `Run`.
 */
export interface Run {
  readonly taskId: string;
  /** The fencing epoch of this run. */
  readonly epoch: number;
  readonly workflow: RunDefinition;
  readonly task: Readonly<TaskRow>;
  /** The worker's services a call uses (the journal's batcher, the run's code and its timings are the kernel's). */
  readonly deps: Readonly<Omit<RunDeps, 'writer' | 'runCode' | 'cancelGraceMs' | 'leaseSafeUntil' | 'replayStallMs' | 'keepParked'>>;
  /** The workflow's retry policy of steps. */
  readonly defaultRetry: RetryPolicy;
  /** How the run stands (see `state.ts`). */
  readonly state: RunState;
  /** Where the run is in its cleanup (see `cleanup-scope.ts`). */
  readonly cleanup: CleanupPhase;
  /** The run's AbortSignal (see `core.ts`). */
  readonly signal: AbortSignal;
  /** The code's run is over. */
  readonly ended: boolean;
  /** Checkpoints: a call's result or failure is recorded as the code receives it. */
  readonly writer: WriterPart;
  /** The order of results handed to the code (`replay.ts`): for a call that writes its own checkpoint. */
  readonly replay: Pick<ReplayPart, 'nextDone' | 'inOrder' | 'reserve'>;
  readonly progress: ProgressPart;
  /** Signals sent to the task and not consumed yet, oldest first. */
  readonly signals: readonly SignalRow[];
  /** News of a signal arrived that no wait has fetched yet (see {@link fetchSignals}). */
  readonly signalNews: boolean;
  /** Fails the run for good, whatever the code does with the error; returns it (to throw). */
  fail(error: Error): Error;
  /** No new call may start: a pause, a drain, or the end of the run. */
  blocked(): boolean;
  /** Reads signals sent since the run last looked into {@link signals}; true if there were any. */
  fetchSignals(): Promise<boolean>;
  /** Takes the signal at `index` of {@link signals} (the call that consumes it records it). */
  takeSignal(index: number): SignalRow;
  /** A call that may not start now (a pause, a drain) is refused: the run cannot finish in this run. */
  refuse(): void;
  /** The lease is lost (`lease`) or the database stayed away (`store`): the run stops, writing nothing more. */
  lose(by: 'lease' | 'store', halt: () => Error): void;
  /** The occurrence the last call named `name` took (1 for the first). */
  occurrence(name: string): number;
  /** The journal's row at the position the next call will take, if the task recorded one there. */
  nextRecorded(): StepRow | undefined;
  /** The code's journal rows loaded at the run's claim (not those it wrote since), by position. */
  recordedRows(): Iterable<StepRow>;
  /** Keeps the business key of the call at `seq` on its journal rows. */
  keyCall(seq: number, key: string): void;
  /** Registers a completed step's compensation (run by the cleanup, in reverse order). */
  registerCompensation(c: Compensation): void;
  /** Registers a `ctx.onCancel` handler (run by the cleanup after a cancel). */
  registerCancelHandler(h: CancelHandler): void;
  /** A step with a compensation has an attempt running: the cleanup waits for it (see `cleanup.ts`). */
  trackUndoable(stepId: string): void;
  /** That step failed, or the code received its output (its compensation is registered). */
  settledUndoable(stepId: string): void;
}
