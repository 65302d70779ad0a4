/**
 * @module run
 * @internal
 * One run of a claimed task: replays the workflow function against the task's journal, executes
 * what has no checkpoint yet, and ends the run with one lifecycle transition (complete, fail,
 * park, suspend, release or abort).
 *
 * Identity. Each `ctx.step` / `ctx.sleep` / `ctx.waitForEvent` call takes the next position
 * (`seq`) in call order; its id is its name plus occurrence (`fetch`, `fetch#2`). A position whose
 * recorded name differs is a non-determinism error.
 *
 * Order. Every result handed to the workflow code (a step's output or failure, an elapsed sleep,
 * an event) is recorded with its place in the order the code received them (`done`). Replay hands
 * recorded results back in that same order, one at a time, letting the code's continuations run
 * in between, so the code makes the same calls in the same order as the first time — also when
 * `Promise.all` branches await different things. Results produced in this run are handed over
 * only after the replay is complete, in the order they were recorded.
 *
 * Results are handed over one per macrotask (after the code's continuations have run), in the
 * first run as in replay, so both interleave branches identically. The one exception is a result
 * of the only call in flight, after the replay: nothing can be ordered against it (the code makes
 * the same lone call in a replay), so the next result may follow without waiting for a turn —
 * for a while (see AT_ONCE_MAX / AT_ONCE_MS), so that timers and I/O still get in.
 *
 * Durability. A result's journal row is written before the run's next side effect (any step
 * attempt waits for it), or with the run's last transition, or one turn after its hand-over at
 * the latest: workflow code between steps has no effects, and a crash before the write only
 * replays that call again. So a task's final step shares the write that completes the task.
 *
 * Stopping. Waits (a long sleep or retry backoff, an event) are registered, not thrown. A wait
 * with a deadline also runs a timer in-process, so it ends on time while other work goes on; when
 * the run has nothing left to do but wait, it parks with all of its waits (the earliest deadline,
 * every awaited event). A pause or a draining worker stops new calls from starting (they do not
 * resolve in this run); when in-flight work has settled the run ends `paused` or back to
 * `pending`. A cancel, or the end of the worker's grace period, fires the AbortSignal and new calls
 * reject; a step that still completes within the grace period is checkpointed. A lost lease (or a
 * database that stays away) stops the run without writing anything more.
 *
 * Workflow code should await only `ctx` calls (and promises built from them); other I/O belongs
 * in steps. The run decides it can only wait after the code has been quiet for a moment.
 */
import { getEventListeners, setMaxListeners } from 'node:events';
import type { Clock } from './clock.ts';
import { optionalMs, toMs, type Duration } from './duration.ts';
import {
  InvalidArgumentError, LeaseLostError, NonDeterminismError, NotSerializableError, StepFailedError, StepTimeoutError,
  StoreUnavailableError, TaskCancelledError, WorkerStoppingError, coerceError,
} from './errors.ts';
import type { Emit, WorkerEventName } from './events.ts';
import type { LifecycleEvent, TaskStatus } from './lifecycle.ts';
import { backoffMs, resolveRetry, shouldRetry, type RetryPolicy } from './retry.ts';
import { decodeError, decodeJson, deserializeError, encodeError, encodeJson } from './serialize.ts';
import type { ClaimedTask, SignalRow, StepKind, StepRow, TaskPatch, TaskRow, Store, TransitionWrite } from './store.ts';
import { planTransition, wakeFor } from './transitions.ts';
import { mayStayInTurn, nextTurn } from './turns.ts';
import type { WriteBatcher } from './write-batcher.ts';
import type { EventResult, StepContext, StepOptions, WaitForEventOptions, Workflow, WorkflowContext } from './workflow.ts';

export interface RunDeps {
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
}

/** A wait registered by the code: the task may park on it. */
interface Wait {
  row: StepRow;
  wakeAt: number | null;
  events: readonly string[];
  describe: Record<string, unknown>;
}

/** A result handed (or about to be handed) to the code whose journal row is not written yet. */
interface Deferred {
  row: StepRow;
  consume: { signalId: number; seq: number } | undefined;
  /** The code has received it. */
  handed: boolean;
  /** Called once the row is durable. */
  onDurable: (() => void) | undefined;
}

/** Live-activity accounting of one call: `idle()` while it only waits, `busy()` when it resumes. */
interface Activity {
  idle(): void;
  busy(): void;
}

/** One `ctx.step` call being executed: its identity and its attempts so far. */
interface StepCall<T> {
  seq: number;
  stepId: string;
  fn: (s: StepContext) => PromiseLike<T> | T;
  options: StepOptions;
  recorded: StepRow | undefined;
  activity: Activity;
  idempotencyKey: string;
  attempt: number;
  lastError: Error | undefined;
  firstStart: number;
  /** When the current attempt started. */
  started: number;
  timeoutMs: number | undefined;
  policy: RetryPolicy;
}

interface Position {
  seq: number;
  stepId: string;
  occurrence: number;
  recorded: StepRow | undefined;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** A promise or any other thenable (a query builder, a promise from another realm). */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/** Names of steps, sleeps and events: not empty, no `#` (it marks repeats) and no `|` (it separates awaited events). */
const STEP_NAME = /^[^#|\s][^#|]{0,199}$/;
/** A replay that waits this long for the code to make the call the journal says comes next has diverged. */
const REPLAY_STALL_MS = 30_000;
/** How long the code must stay quiet before the run decides it can only wait. */
const QUIET_MS = 10;
/**
 * Results handed over at once (without waiting for the next turn) in one macrotask, by all runs of
 * the process together, and the longest such a macrotask may last: then everyone waits for a turn,
 * so heartbeats, cancels and other tasks get in every few milliseconds however quick the steps are.
 */
const AT_ONCE_MAX = 1024;
const AT_ONCE_MS = 4;

export class TaskRun {
  readonly taskId: string;
  readonly epoch: number;
  readonly workflow: Workflow;
  readonly #task: TaskRow;
  readonly #deps: RunDeps;
  readonly #journal = new Map<number, StepRow>();
  readonly #signals: SignalRow[];
  /**
   * The run's AbortSignal, made when first asked for. At the end of a run it is fired only if a
   * step is still running or someone listens: an abort event costs more than a step, and most
   * runs end with nobody to tell. `#aborted` / `#abortReason` are the truth.
   */
  #controller: AbortController | null = null;
  #aborted = false;
  #abortReason: unknown;
  readonly #defaultRetry: RetryPolicy;
  #seq = 0;
  readonly #occurrences = new Map<string, number>();

  // Ordered replay.
  readonly #replay: StepRow[];
  #replayIndex = 0;
  readonly #replayCalls = new Map<number, () => void>();
  #replayScheduled = false;
  #replayStall: NodeJS.Timeout | null = null;
  #replayFinished!: () => void;
  /** The last recorded `done` (results handed to the code so far). */
  #done: number;
  /** Resolutions of this run are handed over in `done` order, after the replay. */
  #gate: Promise<void>;

  // Activity, waits and stop requests.
  /** Live work in progress: step attempts, checkpoints, in-process sleeps, results waiting for their turn. */
  #live = 0;
  /** Of `#live`: results that are ready and only wait for the replay to reach them. */
  #gated = 0;
  /** Bumped by every call and every hand-over: the code is not quiet while it moves. */
  #activity = 0;
  readonly #waits = new Map<number, Wait>();
  /** Ends the in-process timers of waits when the run ends. */
  #waitTimers: AbortController | null = null;
  #pause = false;
  #drain = false;
  /** Calls refused because of a pause or a drain: the run cannot finish in this run any more. */
  #refused = 0;
  /**
   * Results already handed to the code whose journal rows are not written yet. They are written
   * before the run's next side effect (a step attempt, a journal write), with the run's last
   * transition (so the final step of a task costs no write of its own), or one turn after their
   * hand-over at the latest.
   */
  #deferred: Deferred[] = [];
  /** Writes of deferred rows in progress (settles when all of them have). */
  #writes: Promise<unknown> = Promise.resolve();
  #writesPending = 0;
  /** A turn that writes the rows of results handed over is scheduled. */
  #flushTurn = false;
  /** Attempts with a timeout in progress (they listen on their own signal). */
  #timedAttempts = 0;
  /** Abort handlers of the attempts in progress (without a timeout): called when the run aborts. */
  readonly #attemptAborts = new Set<() => void>();
  /** The last transition is being prepared: deferred rows go with it, not on their own. */
  #ending = false;
  #fatal: Error | null = null;
  #cancelReason: string | undefined;
  #cancelled = false;
  #leaseLost = false;
  #halt: Error | null = null;
  #ended = false;
  #idleCheckScheduled = false;
  #signalIdle!: () => void;
  readonly #idle: Promise<void>;
  #signalHalt!: () => void;
  readonly #halted: Promise<void>;

  constructor(claimed: ClaimedTask, workflow: Workflow, deps: RunDeps) {
    this.#task = claimed.task;
    this.taskId = claimed.task.id;
    this.epoch = claimed.task.epoch;
    this.workflow = workflow;
    this.#deps = deps;
    for (const s of claimed.steps) this.#journal.set(s.seq, s);
    this.#signals = [...claimed.signals];
    this.#defaultRetry = resolveRetry(workflow.options.retry);
    this.#replay = claimed.steps.filter((s) => s.done !== null).sort((a, b) => (a.done as number) - (b.done as number));
    this.#done = this.#replay.length ? (this.#replay[this.#replay.length - 1]?.done as number) : 0;
    this.#gate = new Promise<void>((resolve) => (this.#replayFinished = resolve));
    this.#idle = new Promise<void>((resolve) => (this.#signalIdle = resolve));
    this.#halted = new Promise<void>((resolve) => (this.#signalHalt = resolve));
    if (!this.#replay.length) this.#replayFinished();
    if (claimed.task.status === 'cancelling') this.cancel(claimed.task.cancelReason ?? undefined);
    if (claimed.task.pauseRequested) this.#pause = true;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      setMaxListeners(0, this.#controller.signal); // steps with a timeout listen on it
      if (this.#aborted) this.#controller.abort(this.#abortReason);
    }
    return this.#controller.signal;
  }

  /** Fires the run's signal (if anyone asked for it) and stops the attempts in progress. */
  #abortRun(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#abortReason = reason;
    this.#controller?.abort(reason);
    for (const onAbort of [...this.#attemptAborts]) onAbort();
  }

  // --- commands from the worker ---------------------------------------------------------------

  /** The task was cancelled: fire the signal; the run ends `cancelled`. */
  cancel(reason: string | undefined): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#cancelReason = reason;
    this.#haltWith(new TaskCancelledError(this.taskId, reason));
  }

  /** Another worker owns the task now (or may, any moment): stop at once, write nothing. */
  loseLease(): void {
    if (this.#leaseLost) return;
    this.#leaseLost = true;
    this.#haltWith(new LeaseLostError(this.taskId, this.epoch));
  }

  /** Start no new call; end `paused` once in-flight work has settled. */
  requestPause(): void {
    if (this.#pause) return;
    this.#pause = true;
    this.#scheduleIdleCheck();
  }

  /** The pause request was withdrawn before the run honoured it. */
  withdrawPause(): void {
    this.#pause = false;
  }

  /** The worker is stopping: start no new call; hand the task back once in-flight work settled. */
  drain(): void {
    this.#drain = true;
    this.#scheduleIdleCheck();
  }

  /** The worker's grace period is over: fire the signal; the task goes back to pending. */
  abortForShutdown(): void {
    this.#haltWith(new WorkerStoppingError());
  }

  #haltWith(error: Error): void {
    if (this.#halt) return;
    this.#halt = error;
    this.#abortRun(error);
    this.#signalHalt();
  }

  #haltReason(): Error {
    return this.#halt ?? new Error('run halted');
  }

  /** Whether the run may still write: not after losing its lease or giving up on the database. */
  #mayWrite(): boolean {
    return !this.#leaseLost && !(this.#halt instanceof StoreUnavailableError);
  }

  #blocked(): boolean {
    return this.#pause || this.#drain || this.#ended;
  }

  // --- the run ----------------------------------------------------------------------------------

  /** Runs the workflow until it finishes or can only wait, and writes the outcome. Never throws. */
  async execute(): Promise<TaskStatus | 'lease-lost'> {
    const ctx = this.#context();
    let result: Outcome | null = null;
    const fnDone = Promise.resolve()
      .then(() => this.workflow.fn(ctx, decodeJson(this.#task.input)))
      .then(
        (value) => void (result = { ok: true, value }),
        (error: unknown) => void (result = { ok: false, error }),
      );
    if (this.#replay.length) this.#scheduleReplay(); // arms the stall watchdog if the first call never comes
    await Promise.race([fnDone, this.#idle, this.#halted.then(() => this.#grace(fnDone))]);
    if (this.#halt) await this.#settleLive();
    this.#ended = true;
    this.#waitTimers?.abort(null);
    if (this.#replayStall) clearTimeout(this.#replayStall);
    try {
      return await this.#finish(result);
    } catch (e) {
      // The outcome could not be written (database unreachable): the lease will expire and the
      // task will be resumed from its last checkpoint by whichever worker claims it.
      this.#deps.emit('worker:error', { error: coerceError(e), during: `finishing task ${this.taskId}` });
      return 'lease-lost';
    } finally {
      // Steps still running after the workflow returned (the losers of a race) are told to stop.
      // (Nothing to tell when no step is running and nobody listens directly: no abort event to
      // dispatch. A signal derived with AbortSignal.any from a step that has already returned is
      // not told: work a step leaves behind after returning is its own.)
      if (!this.#aborted && (this.#attemptAborts.size || this.#timedAttempts || (this.#controller && getEventListeners(this.#controller.signal, 'abort').length))) {
        this.#abortRun(new Error(`Task ${this.taskId}: the run has ended`));
      }
    }
  }

  /**
   * After a halt, give the function `cancelGraceMs` to settle. Real time, not the engine's clock:
   * this bounds how long a worker slot stays busy, whatever time the workflow lives in.
   */
  async #grace(work: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#deps.cancelGraceMs)))]);
    clearTimeout(timer);
  }

  /** After a halt, wait (within the grace period) for live work to notice its signal. */
  async #settleLive(): Promise<void> {
    const deadline = Date.now() + this.#deps.cancelGraceMs;
    while (this.#live > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  }

  async #finish(result: Outcome | null): Promise<TaskStatus | 'lease-lost'> {
    if (this.#leaseLost) return this.#lost();
    if (this.#cancelled) return this.#end('abort', { detail: { reason: this.#cancelReason ?? null } });
    if (this.#fatal) return this.#end('fail', { set: { error: encodeError(this.#fatal) }, detail: { error: this.#fatal.message } });
    const rows = [...this.#waits.values()].map((w) => w.row);
    if (this.#halt) return this.#end('release', { steps: rows, detail: { reason: this.#halt.message } });
    if (!result) {
      // The code can only wait (or was asked to stop starting work).
      if (this.#pause) return this.#end('suspend', { steps: rows, detail: { reason: 'pause requested' } });
      if (this.#drain) return this.#end('release', { steps: rows, detail: { reason: 'worker stopping' } });
      if (this.#refused) return this.#end('release', { steps: rows, detail: { reason: 'pause withdrawn' } });
      if (this.#waits.size) return this.#park(rows);
      return this.#end('release', { steps: rows, detail: { reason: 'run did not settle' } });
    }
    const outcome: Outcome = result;
    if (!outcome.ok) {
      const error = coerceError(outcome.error);
      return this.#end('fail', { set: { error: encodeError(error) }, detail: { error: error.message } });
    }
    const leftover = [...this.#journal.keys()].filter((seq) => seq >= this.#seq).sort((a, b) => a - b);
    if (leftover.length) {
      const first = this.#journal.get(leftover[0] as number) as StepRow;
      const err = new NonDeterminismError(
        this.taskId,
        first.seq,
        `${this.#who()}: the workflow returned after ${this.#seq} step(s), but the journal has ${leftover.length} more, starting with ${first.kind} "${first.name}" at position ${first.seq}. The code changed while the task was in flight.`,
      );
      return this.#end('fail', { set: { error: encodeError(err) }, detail: { error: err.message } });
    }
    let output: string | null;
    try {
      output = encodeJson(outcome.value, () => `The output of workflow "${this.workflow.name}"`);
    } catch (e) {
      return this.#end('fail', { set: { error: encodeError(e) }, detail: { error: (e as Error).message } });
    }
    return this.#end('complete', { set: { output } });
  }

  /** Parks on every registered wait: due at the earliest deadline, or when any awaited event arrives. */
  #park(rows: StepRow[]): Promise<TaskStatus | 'lease-lost'> {
    const waits = [...this.#waits.values()];
    const deadlines = waits.map((w) => w.wakeAt).filter((t): t is number => t !== null);
    const wakeAt = deadlines.length ? Math.min(...deadlines) : null;
    const events = [...new Set(waits.flatMap((w) => w.events))];
    const wait = waits.length === 1 ? (waits[0] as Wait).describe : { kind: 'several', until: wakeAt, waits: waits.map((w) => w.describe) };
    return this.#end('park', {
      steps: rows,
      set: { runAt: wakeAt, wait: JSON.stringify(wait), waitEvents: events.length ? events : null },
      detail: wait,
    });
  }

  #lost(): 'lease-lost' {
    this.#deps.emit('lease:lost', { taskId: this.taskId, epoch: this.epoch });
    return 'lease-lost';
  }

  /** Writes the run's last transition, fenced by the epoch; follows a concurrent cancel. */
  async #end(requested: LifecycleEvent, opts: { set?: TaskPatch; detail?: unknown; steps?: StepRow[] }): Promise<TaskStatus | 'lease-lost'> {
    // Rows of results not yet written go with the last transition: no more writes of their own,
    // and every write already started has settled (it may be accepted or show the lease lost).
    this.#ending = true;
    for (let w = this.#writes; ; w = this.#writes) {
      await w.then(
        () => undefined,
        () => undefined,
      );
      if (w === this.#writes) break;
    }
    if (!this.#mayWrite()) return this.#lost();
    const deferred = this.#deferred.splice(0);
    const resultRows = deferred.map((d) => d.row);
    const consume = deferred.flatMap((d) => (d.consume ? [d.consume] : []));
    let status: TaskStatus = this.#cancelled ? 'cancelling' : 'running';
    let event = requested;
    let set = opts.set;
    let detail = opts.detail;
    for (let i = 0; i < 4; i++) {
      const ev: LifecycleEvent = status === 'cancelling' ? 'abort' : event;
      const { write } = planTransition({
        taskId: this.taskId,
        state: { status, pauseRequested: event === 'suspend' },
        event: ev,
        guard: { epoch: this.epoch },
        at: this.#deps.clock.now(),
        set: ev === event ? set : {},
        detail: ev === event ? detail : { reason: this.#cancelReason ?? null },
        workerId: this.#deps.workerId,
        steps: ev === 'abort' ? resultRows : [...(opts.steps ?? []), ...resultRows],
        consume,
        notify: (edge) => wakeFor(edge, this.taskId, this.workflow.name),
      });
      // Parking or handing back must not swallow a pause this run has not heard of yet.
      if (ev === 'park' || ev === 'release') write.pauseRequested = false;
      const row = await this.#writeLast(write);
      if (row) {
        for (const d of deferred) d.onDurable?.();
        return row.status;
      }
      const fresh = await this.#deps.store.getTask(this.taskId);
      if (!fresh || fresh.epoch !== this.epoch || (fresh.status !== 'running' && fresh.status !== 'cancelling')) return this.#lost();
      status = fresh.status;
      if (event === 'suspend' && !fresh.pauseRequested) {
        // A pause withdrawn before the run stopped: hand the task back instead of parking it paused.
        event = 'release';
      } else if ((event === 'park' || event === 'release') && fresh.pauseRequested) {
        // A pause arrived meanwhile: stop paused, with the same journal rows.
        event = 'suspend';
        set = {};
        detail = { reason: 'pause requested' };
      }
    }
    return this.#lost();
  }

  /**
   * The last transition; while the lease is surely ours a failing database is retried (results
   * the code received may travel only with this write, and giving up means running them again).
   */
  async #writeLast(write: TransitionWrite): Promise<TaskRow | null> {
    for (;;) {
      try {
        return (await this.#deps.writer.write(write)) as TaskRow | null;
      } catch (e) {
        if (this.#deps.clock.now() >= this.#deps.leaseSafeUntil() || !this.#mayWrite()) throw e;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  #who(): string {
    const started = this.#task.workflowVersion;
    const now = this.workflow.version;
    return `Task ${this.taskId} (workflow "${this.workflow.name}" version ${now}${started !== now ? `, started under version ${started}` : ''})`;
  }

  // --- bookkeeping ------------------------------------------------------------------------------

  /**
   * Runs `work` counted as live activity until it settles or calls `idle()` (when it turns into a
   * wait that may outlast the run); then checks whether the run can only wait.
   */
  #track<T>(work: (activity: Activity) => Promise<T>): Promise<T> {
    this.#live++;
    let counted = true;
    const activity: Activity = {
      idle: () => {
        if (!counted) return;
        counted = false;
        this.#live--;
        this.#scheduleIdleCheck();
      },
      busy: () => {
        if (counted) return;
        counted = true;
        this.#live++;
      },
    };
    let p: Promise<T>;
    try {
      p = work(activity);
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(activity.idle, activity.idle);
    return p;
  }

  /**
   * Ends the run when it can only wait: nothing live, and the code quiet (after its continuations
   * and a short pause, so that a plain `await` in workflow code is not mistaken for idleness).
   */
  #scheduleIdleCheck(): void {
    if (this.#idleCheckScheduled || this.#ended) return;
    // Only a run that waits, was asked to stop starting work, or holds results for the replay can
    // end before its code returns; the common case (a run busy with its steps) checks nothing.
    if (!this.#waits.size && !this.#pause && !this.#drain && !this.#refused && !this.#gated) return;
    this.#idleCheckScheduled = true;
    const quietSince = this.#activity;
    setImmediate(() => {
      if (!this.#quiet()) {
        this.#idleCheckScheduled = false;
        return;
      }
      setTimeout(() => {
        this.#idleCheckScheduled = false;
        if (!this.#quiet() || this.#activity !== quietSince) {
          if (!this.#ended) this.#scheduleIdleCheck();
          return;
        }
        this.#onQuiet();
      }, QUIET_MS).unref?.();
    });
  }

  /** Nothing runs but results waiting for the replay, and no replay turn is pending. */
  #quiet(): boolean {
    return !this.#ended && this.#live === this.#gated && !this.#replayScheduled;
  }

  #onQuiet(): void {
    const next = this.#replay[this.#replayIndex];
    const stopping = this.#pause || this.#drain || this.#refused > 0;
    if (next && !stopping && (this.#waits.size || this.#gated)) {
      // The code only waits, yet the journal says it made another call next.
      this.#fail(
        new NonDeterminismError(
          this.taskId,
          next.seq,
          `${this.#who()}: the code waits, but the journal says it called ${next.kind} "${next.name}" (position ${next.seq}) next when the task first ran. The workflow's control flow depends on something other than its steps' results.`,
        ),
      );
      return;
    }
    if (this.#live > 0) return; // results still waiting for the replay (the stall watchdog covers it)
    if (this.#waits.size || stopping) this.#signalIdle();
  }

  /** A promise that does not settle in this run (the call resumes in a later run). */
  #parked<T>(): Promise<T> {
    this.#scheduleIdleCheck();
    return new Promise<T>(() => undefined);
  }

  /** What a call gets when it may not start: a rejection if halted, else it waits for a later run. */
  #notNow<T>(): Promise<T> {
    if (this.#fatal) return Promise.reject(this.#fatal);
    if (this.#halt) return Promise.reject(this.#halt);
    this.#refused++;
    return this.#parked<T>();
  }

  /** Marks the run as failed for good, whatever the workflow code does with the error. */
  #fail(error: Error): Error {
    this.#fatal ??= error;
    this.#scheduleIdleCheck();
    this.#signalIdle();
    return error;
  }

  // --- ordered replay ---------------------------------------------------------------------------

  /** A call whose result is recorded: it is handed back when its turn (`done`) comes. */
  #replayed<T>(seq: number, settle: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#replayCalls.set(seq, () => {
        try {
          resolve(settle());
        } catch (e) {
          reject(e);
        }
      });
      this.#scheduleReplay();
    });
  }

  #scheduleReplay(): void {
    if (this.#replayScheduled) return;
    this.#replayScheduled = true;
    // After the code's pending continuations (microtasks) have run.
    nextTurn(() => {
      this.#replayScheduled = false;
      this.#replayNext();
    });
  }

  /** Hands back the next recorded result if the code has asked for it; one per turn. */
  #replayNext(): void {
    if (this.#ended) return;
    const next = this.#replay[this.#replayIndex];
    if (!next) {
      this.#replayFinished();
      this.#scheduleIdleCheck();
      return;
    }
    const call = this.#replayCalls.get(next.seq);
    if (!call) {
      // The code has not made this call yet: wait for it, but not forever.
      if (this.#replayStall) clearTimeout(this.#replayStall);
      const index = this.#replayIndex;
      this.#replayStall = setTimeout(() => {
        if (this.#replayIndex !== index || this.#ended) return;
        this.#fail(
          new NonDeterminismError(
            this.taskId,
            next.seq,
            `${this.#who()}: replay expects ${next.kind} "${next.name}" (position ${next.seq}) to be called next, as it was when the task first ran, but the code has not called it. The workflow's control flow depends on something other than its steps' results.`,
          ),
        );
      }, REPLAY_STALL_MS);
      this.#replayStall.unref?.();
      return;
    }
    if (this.#replayStall) clearTimeout(this.#replayStall);
    this.#replayStall = null;
    this.#replayCalls.delete(next.seq);
    this.#replayIndex++;
    this.#activity++;
    call();
    this.#scheduleReplay();
  }

  /**
   * Hands a result of this run to the code in `done` order, after the replay: `done` is taken
   * now (synchronously), the result is handed over when `work` settled and every earlier result
   * has been handed over; the next one follows a macrotask later, as in replay.
   */
  #inOrder<T>(work: Promise<T>, afterHandOver?: () => void): Promise<T> {
    const previous = this.#gate;
    let open!: () => void;
    this.#gate = new Promise<void>((resolve) => (open = resolve));
    this.#live++;
    let gated = false;
    const ready = (): void => {
      // The result is ready; if it still waits for the replay, the run may be stalled on it.
      gated = true;
      this.#gated++;
      this.#scheduleIdleCheck();
      if (this.#replayIndex < this.#replay.length) this.#scheduleReplay();
    };
    work.then(ready, ready);
    const settled = previous.then(() => work);
    const release = (): void => {
      if (gated) this.#gated--;
      this.#live--;
      open();
      this.#scheduleIdleCheck();
    };
    const handedOver = (): void => {
      this.#activity++;
      afterHandOver?.();
      if (this.#mayHandOverAtOnce()) release();
      else nextTurn(release);
    };
    settled.then(handedOver, handedOver);
    return settled;
  }

  /**
   * Whether the next result may follow this one without waiting for a turn: this is the only call
   * in flight (its own activity and hand-over: nothing it could be ordered against, now or in a
   * replay, where the code makes the same lone call) and the replay is over. Bounded in number and
   * time, so that timers and I/O get in between.
   */
  #mayHandOverAtOnce(): boolean {
    if (this.#live > 2 || this.#replayIndex < this.#replay.length || this.#replayScheduled) return false;
    return mayStayInTurn(AT_ONCE_MAX, AT_ONCE_MS);
  }

  // --- the context given to workflow code ------------------------------------------------------

  #context(): WorkflowContext {
    const run = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the getter's `this` is the context
    return Object.freeze({
      taskId: this.taskId,
      workflow: this.workflow.name,
      workflowVersion: this.workflow.version,
      get signal(): AbortSignal {
        return run.signal;
      },
      // The JSON bound on outputs is a compile-time check for workflow authors; the run takes any value.
      step: (<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions) => this.#step(name, fn, options)) as WorkflowContext['step'],
      sleep: (name: string, duration: Duration) => this.#sleep(name, duration),
      waitForEvent: <T>(name: string | readonly string[], options?: WaitForEventOptions) => this.#waitForEvent<T>(name, options),
    });
  }

  /** Takes the next journal position for a call; checks it against the journal. */
  #position(name: string, kind: StepKind): Position {
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      throw this.#fail(
        new InvalidArgumentError(
          `${kind} name ${JSON.stringify(name)} is not valid: use 1-200 characters without "#" (it marks repeats: fetch, fetch#2) or "|".`,
        ),
      );
    }
    this.#activity++;
    const seq = this.#seq++;
    const occurrence = (this.#occurrences.get(name) ?? 0) + 1;
    this.#occurrences.set(name, occurrence);
    const stepId = occurrence === 1 ? name : `${name}#${occurrence}`;
    const recorded = this.#journal.get(seq);
    if (recorded && (recorded.name !== stepId || recorded.kind !== kind)) {
      throw this.#fail(
        new NonDeterminismError(
          this.taskId,
          seq,
          `${this.#who()}: at position ${seq} the code now calls ${kind} "${stepId}", but the journal recorded ${recorded.kind} "${recorded.name}". ` +
            'The workflow code changed incompatibly while the task was in flight; deploy such changes under a new workflow version.',
        ),
      );
    }
    return { seq, stepId, occurrence, recorded };
  }

  #row(seq: number, stepId: string, kind: StepKind, fields: Partial<StepRow>): StepRow {
    return {
      taskId: this.taskId, seq, name: stepId, kind, status: 'completed', output: null, error: null,
      attempts: 0, startedAt: null, finishedAt: null, wakeAt: null, epoch: this.epoch, done: null, ...fields,
    };
  }

  /**
   * A fenced journal write. A refused write means the lease is lost. A database that does not
   * answer is retried while the lease is surely still ours; after that, the run stops.
   */
  async #checkpoint(row: StepRow, consume?: { signalId: number; seq: number }): Promise<void> {
    for (;;) {
      // After a cancel or a worker stop the lease is still ours: a step that completed is recorded.
      if (!this.#mayWrite()) throw this.#haltReason();
      let accepted: unknown;
      try {
        accepted = await this.#deps.writer.write(
          consume ? { kind: 'step', taskId: this.taskId, epoch: this.epoch, step: row, consume } : { kind: 'step', taskId: this.taskId, epoch: this.epoch, step: row },
        );
      } catch (e) {
        if (this.#deps.clock.now() < this.#deps.leaseSafeUntil() && this.#mayWrite()) {
          await new Promise((r) => setTimeout(r, 500));
          continue;
        }
        // Not the step's fault: stop the run; the task resumes from its last checkpoint.
        this.#haltWith(new StoreUnavailableError(`Could not checkpoint ${row.kind} "${row.name}" of task ${this.taskId}: ${coerceError(e).message}`, { cause: e }));
        throw this.#haltReason();
      }
      if (!accepted) {
        this.loseLease();
        throw this.#haltReason();
      }
      return;
    }
  }

  /**
   * Records a result for the code (with its `done`) and hands it over in order. Its row is
   * written later (see `#deferred`): nothing the code does before its next side effect is
   * observable, and a crash before the write replays the result's call, which is deterministic.
   */
  #complete<T>(row: StepRow, value: () => T, consume?: { signalId: number; seq: number }, onDurable?: () => void): Promise<T> {
    const done = ++this.#done;
    const entry: Deferred = { row: { ...row, done }, consume, handed: false, onDurable };
    this.#deferred.push(entry);
    return this.#inOrder(Promise.resolve().then(value), () => {
      entry.handed = true;
      if (this.#flushTurn) return;
      this.#flushTurn = true;
      nextTurn(() => {
        this.#flushTurn = false;
        void this.#flush(true).catch(() => undefined);
      });
    });
  }

  /**
   * Writes the deferred rows (with `handedOnly`, those the code has received: a result still
   * waiting for its turn may yet go with the last transition); resolves when every row written so
   * far is durable. Once the last transition is being prepared, rows wait for it.
   */
  #flush(handedOnly = false): Promise<unknown> {
    if (this.#deferred.length && this.#mayWrite() && !this.#ending) {
      const batch = handedOnly ? this.#deferred.filter((d) => d.handed) : this.#deferred;
      this.#deferred = handedOnly ? this.#deferred.filter((d) => !d.handed) : [];
      if (batch.length) {
        const only = batch.length === 1 ? (batch[0] as Deferred) : null;
        const written = only
          ? this.#checkpoint(only.row, only.consume).then(only.onDurable)
          : Promise.all(batch.map((d) => this.#checkpoint(d.row, d.consume))).then(() => {
              for (const d of batch) d.onDurable?.();
            });
        const settled = (): void => void this.#writesPending--;
        written.then(settled, settled);
        // Earlier writes all settled: this one alone is what is in progress.
        this.#writes = this.#writesPending++ === 0 ? written : Promise.all([this.#writes, written]);
      }
    }
    return this.#writes;
  }

  /**
   * Registers a wait on which the task may park. With `timer`, a wait that has a deadline also
   * ends in-process when the deadline comes while the run is still going (other work is live);
   * the promise then resolves and the caller goes on. Otherwise it does not settle in this run.
   */
  #waitFor(wait: Wait, activity: Activity, timer = true): Promise<void> {
    this.#waits.set(wait.row.seq, wait);
    activity.idle();
    if (!timer || wait.wakeAt === null) return this.#parked<void>();
    return new Promise<void>((resolve) => {
      this.#deps.clock.sleep(Math.max(0, (wait.wakeAt as number) - this.#deps.clock.now()), (this.#waitTimers ??= new AbortController()).signal).then(
        () => {
          if (this.#ended || this.#waits.get(wait.row.seq) !== wait) return;
          this.#waits.delete(wait.row.seq);
          activity.busy();
          resolve();
        },
        () => undefined,
      );
    });
  }

  /** A short wait in-process; a long one is registered (it may park the task). Resolves when due. */
  async #pauseUntil(wakeAt: number, wait: Wait, activity: Activity): Promise<void> {
    const remaining = wakeAt - this.#deps.clock.now();
    if (remaining <= 0) return;
    if (remaining > this.#deps.parkAfterMs) return this.#waitFor(wait, activity);
    try {
      await this.#deps.clock.sleep(remaining, this.signal);
    } catch {
      throw this.#haltReason();
    }
  }

  /** Stops a call that may not go on now (pause, drain): its row is kept for the next run. */
  #holdFor(wait: Wait, activity: Activity): Promise<never> {
    this.#refused++;
    return this.#waitFor(wait, activity, false) as Promise<never>;
  }

  // --- ctx.step ---------------------------------------------------------------------------------

  #step<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options: StepOptions = {}): Promise<T> {
    let pos: Position;
    try {
      pos = this.#position(name, 'step');
      const rec = pos.recorded;
      if (rec && rec.done !== null) {
        return this.#replayed(pos.seq, () => {
          if (rec.status === 'completed') return decodeJson(rec.output) as T;
          throw new StepFailedError(pos.stepId, rec.attempts, deserializeError(decodeError(rec.error as string)));
        });
      }
      if (typeof fn !== 'function') throw this.#fail(new InvalidArgumentError(`ctx.step("${name}"): the second argument must be a function`));
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#fatal || this.#halt || this.#blocked()) return this.#notNow<T>();
    const call: StepCall<T> = {
      seq: pos.seq, stepId: pos.stepId, fn, options, recorded: pos.recorded, activity: null as unknown as Activity,
      idempotencyKey: `v1:${this.taskId}:${name}#${pos.occurrence}`, attempt: 0, lastError: undefined, firstStart: 0, started: 0,
      timeoutMs: undefined, policy: this.#defaultRetry,
    };
    return this.#track((activity) => {
      call.activity = activity;
      return this.#execute(call);
    });
  }

  /** A wait until the next attempt of a step, with the row that records its attempts so far. */
  #retryWait(c: StepCall<unknown>, wakeAt: number): Wait {
    return {
      row: this.#row(c.seq, c.stepId, 'step', {
        status: 'retrying', error: c.lastError ? encodeError(c.lastError) : null, attempts: c.attempt, startedAt: c.firstStart, wakeAt,
      }),
      wakeAt,
      events: [],
      describe: { kind: 'retry', step: c.stepId, attempt: c.attempt + 1, until: wakeAt },
    };
  }

  /** The step failed for good: the code receives a StepFailedError (recorded like any result). */
  #stepFailed<T>(c: StepCall<T>, error: Error): Promise<T> {
    this.#deps.emit('step:failed', { taskId: this.taskId, step: c.stepId, attempt: c.attempt, error });
    const failed = this.#row(c.seq, c.stepId, 'step', {
      status: 'failed', error: encodeError(error), attempts: c.attempt, startedAt: c.firstStart, finishedAt: this.#deps.clock.now(),
    });
    const attempts = c.attempt;
    return this.#complete(failed, () => {
      throw new StepFailedError(c.stepId, attempts, error);
    });
  }

  async #execute<T>(c: StepCall<T>): Promise<T> {
    const { clock, emit, hears, parkAfterMs } = this.#deps;
    const { options, recorded } = c;
    if (options.retry !== undefined) c.policy = resolveRetry(options.retry, this.#defaultRetry);
    if (options.timeout !== undefined) c.timeoutMs = optionalMs(options.timeout, `timeout of step "${c.stepId}"`);
    if (recorded) {
      if (recorded.status === 'retrying') c.attempt = recorded.attempts;
      if (recorded.error) c.lastError = deserializeError(decodeError(recorded.error));
    }
    c.firstStart = recorded?.startedAt ?? clock.now();
    if (recorded?.status === 'retrying' && recorded.wakeAt !== null) await this.#pauseUntil(recorded.wakeAt, this.#retryWait(c, recorded.wakeAt), c.activity);
    for (;;) {
      // No side effect before every result the code has received is durable.
      await this.#flush();
      if (this.#halt) throw this.#halt;
      if (this.#blocked()) {
        // Paused or draining: this attempt does not start in this run (a retry keeps its count).
        if (c.attempt > 0) return this.#holdFor(this.#retryWait(c, clock.now()), c.activity);
        this.#refused++;
        c.activity.idle();
        return this.#parked<T>();
      }
      c.attempt++;
      c.started = clock.now();
      if (hears('step:started')) emit('step:started', { taskId: this.taskId, step: c.stepId, attempt: c.attempt });
      let value: T;
      try {
        value = await this.#attempt(c);
      } catch (raw) {
        if (this.#halt) throw this.#halt;
        if (this.#ended) throw raw; // a step left running when the run ended: nothing to record
        const error = coerceError(raw);
        if (!shouldRetry(c.policy, error, c.attempt)) return this.#stepFailed(c, error);
        const delayMs = backoffMs(c.policy, c.attempt, error);
        const wakeAt = clock.now() + delayMs;
        emit('step:retrying', { taskId: this.taskId, step: c.stepId, attempt: c.attempt, delayMs, error, parked: delayMs > parkAfterMs });
        c.lastError = error;
        await this.#pauseUntil(wakeAt, this.#retryWait(c, wakeAt), c.activity);
        continue;
      }
      return this.#stepSucceeded(c, value);
    }
  }

  /** Records the step's output (handed back as its JSON copy, as a replay would). */
  #stepSucceeded<T>(c: StepCall<T>, value: T): Promise<T> {
    let output: string | null;
    try {
      output = encodeJson(value, () => `The output of step "${c.stepId}"`);
    } catch (e) {
      return this.#stepFailed(c, e as NotSerializableError);
    }
    const finishedAt = this.#deps.clock.now();
    const row = this.#row(c.seq, c.stepId, 'step', { output, attempts: c.attempt, startedAt: c.firstStart, finishedAt });
    const attempt = c.attempt;
    const { emit, hears } = this.#deps;
    return this.#complete(
      row,
      () => (output === null ? undefined : JSON.parse(output)) as T,
      undefined,
      // Reported once the result is durable (a step reported completed never runs again).
      () => {
        if (hears('step:completed')) emit('step:completed', { taskId: this.taskId, step: c.stepId, attempt, durationMs: finishedAt - c.started });
      },
    );
  }

  /** One attempt: resolves with the step's value, rejects with its error, its timeout or the halt reason. */
  #attempt<T>(c: StepCall<T>): Promise<T> {
    if (this.#aborted) return Promise.reject(this.#abortReason);
    const timeoutMs = c.timeoutMs;
    const timeout = timeoutMs === undefined ? undefined : new AbortController();
    // With a timeout, the step's own signal (the run's or the timeout's); without, the run's.
    const own = timeout ? AbortSignal.any([this.signal, timeout.signal]) : undefined;
    const ctx: StepContext = Object.freeze({
      signal: own ?? this.signal,
      idempotencyKey: c.idempotencyKey, attempt: c.attempt, lastError: c.lastError, taskId: this.taskId, stepName: c.stepId, epoch: this.epoch,
    });
    const fn = c.fn;
    return new Promise<T>((resolve, reject) => {
      const timerStop = timeout ? new AbortController() : undefined;
      let done = false;
      const cleanup = (): void => {
        if (done) return;
        done = true;
        if (own) {
          own.removeEventListener('abort', onAbort);
          this.#timedAttempts--;
        }
        else this.#attemptAborts.delete(onAbort);
        timerStop?.abort(null);
      };
      const onAbort = (): void => {
        // The step was told to stop. If it was cancelled or its worker is stopping, the lease is
        // still ours: give it the grace period to finish (a result it returns is recorded, so its
        // side effect is not repeated). A timeout or a lost lease ends the attempt at once.
        const reason: unknown = own ? own.reason : this.#abortReason;
        if (this.#mayWrite() && this.#halt && reason === this.#halt) return;
        cleanup();
        reject(reason);
      };
      // Without a timeout the run calls the attempt's handler when it aborts (once), which costs
      // far less than an EventTarget listener per attempt.
      if (own) {
        this.#timedAttempts++;
        own.addEventListener('abort', onAbort, { once: true });
      }
      else this.#attemptAborts.add(onAbort);
      if (timeout && timerStop && timeoutMs !== undefined) {
        this.#deps.clock.sleep(timeoutMs, timerStop.signal).then(
          () => timeout.abort(new StepTimeoutError(c.stepId, timeoutMs)),
          () => undefined,
        );
      }
      let result: PromiseLike<T> | T;
      try {
        result = fn(ctx);
      } catch (e) {
        cleanup();
        return reject(e);
      }
      if (isThenable(result)) {
        // Adopted as a real promise: a foreign thenable gets the same one-shot settlement.
        Promise.resolve(result).then(
          (v) => {
            cleanup();
            resolve(v as T);
          },
          (e: unknown) => {
            cleanup();
            reject(e);
          },
        );
      } else {
        // A synchronous step: its value is final.
        cleanup();
        resolve(result as T);
      }
    });
  }

  // --- ctx.sleep ------------------------------------------------------------------------------

  #sleep(name: string, duration: Duration): Promise<void> {
    let pos: Position;
    let ms: number;
    try {
      pos = this.#position(name, 'sleep');
      if (pos.recorded && pos.recorded.done !== null) return this.#replayed(pos.seq, () => undefined);
      ms = toMs(duration, `duration of sleep "${pos.stepId}"`);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#fatal || this.#halt || this.#blocked()) return this.#notNow();
    const { seq, stepId, recorded } = pos;
    return this.#track(async (activity) => {
      const now = this.#deps.clock.now();
      const row = recorded ?? this.#row(seq, stepId, 'sleep', { status: 'waiting', startedAt: now, wakeAt: now + ms });
      const wakeAt = row.wakeAt as number;
      const wait: Wait = { row, wakeAt, events: [], describe: { kind: 'sleep', step: stepId, until: wakeAt } };
      // The wake-up time is recorded once, so a resumed sleep ends when it was meant to.
      if (!recorded && wakeAt - now <= this.#deps.parkAfterMs) {
        await this.#flush();
        await this.#checkpoint(row);
      }
      await this.#pauseUntil(wakeAt, wait, activity);
      if (this.#halt) throw this.#halt;
      if (this.#blocked()) return this.#holdFor(wait, activity);
      return this.#complete({ ...row, status: 'completed', finishedAt: this.#deps.clock.now() }, () => undefined);
    });
  }

  // --- ctx.waitForEvent -------------------------------------------------------------------------

  #waitForEvent<T>(nameOrNames: string | readonly string[], options: WaitForEventOptions = {}): Promise<EventResult<T>> {
    let pos: Position;
    let timeoutMs: number | undefined;
    let names: readonly string[];
    try {
      names = typeof nameOrNames === 'string' ? [nameOrNames] : [...nameOrNames];
      if (!names.length || names.some((n) => typeof n !== 'string' || !STEP_NAME.test(n) || n.includes('+'))) {
        throw this.#fail(new InvalidArgumentError(`waitForEvent: ${JSON.stringify(nameOrNames)} is not an event name or a non-empty list of them (1-200 characters, no "#", "|" or "+").`));
      }
      pos = this.#position(names.join('+'), 'event');
      const rec = pos.recorded;
      if (rec && rec.done !== null) return this.#replayed(pos.seq, () => decodeJson(rec.output) as EventResult<T>);
      timeoutMs = optionalMs(options.timeout, `timeout of waitForEvent "${pos.stepId}"`);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#fatal || this.#halt || this.#blocked()) return this.#notNow();
    const { seq, stepId, recorded } = pos;
    return this.#track(async (activity) => {
      const now = this.#deps.clock.now();
      const deadline = recorded ? recorded.wakeAt : timeoutMs === undefined ? null : now + timeoutMs;
      const startedAt = recorded?.startedAt ?? now;
      const base = this.#row(seq, stepId, 'event', { status: 'waiting', startedAt, wakeAt: deadline });
      const index = this.#signals.findIndex((s) => names.includes(s.name));
      if (index >= 0) {
        const [signal] = this.#signals.splice(index, 1) as [SignalRow];
        const result: EventResult<T> = { timedOut: false, name: signal.name, payload: decodeJson(signal.payload) as T };
        return this.#complete({ ...base, status: 'completed', output: JSON.stringify(result), finishedAt: now }, () => result, { signalId: signal.id, seq });
      }
      if (deadline === null || deadline > now) {
        const what = names.length === 1 ? { event: names[0] } : { events: names };
        await this.#waitFor({ row: recorded ?? base, wakeAt: deadline, events: names, describe: { kind: 'event', ...what, step: stepId, until: deadline } }, activity);
        if (this.#halt) throw this.#halt;
      }
      // The deadline passed (in a later run, or in-process while other work went on).
      const result: EventResult<T> = { timedOut: true };
      return this.#complete({ ...base, status: 'completed', output: JSON.stringify(result), finishedAt: this.#deps.clock.now() }, () => result);
    });
  }
}
