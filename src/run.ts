/**
 * @module run
 * @internal
 * One run of a claimed task: replays the workflow function against the task's journal, executes
 * the steps that have no checkpoint yet, and ends the run with one lifecycle transition
 * (complete, fail, park, suspend, release or abort).
 *
 * Replay: the function runs from the top every time; each `ctx.step` / `ctx.sleep` /
 * `ctx.waitForEvent` call takes the next position (`seq`) in call order, so loops and
 * `Promise.all` get stable identities. A position with a checkpoint returns the recorded output
 * without running; a position whose recorded name differs is a non-determinism error.
 *
 * Stopping: a run stops at a step boundary when it must wait (park), was paused, or its worker is
 * draining; the step that noticed throws an internal `SuspendRun`, which user code should not
 * catch; if it does, the run still suspends, because the decision is taken from the run's own
 * flags, not from what the function returned. A run halts at once (the AbortSignal fires) when it
 * is cancelled, loses its lease, or its worker stops past its grace period.
 */
import type { Clock } from './clock.ts';
import { optionalMs, toMs, type Duration } from './duration.ts';
import {
  LeaseLostError, NonDeterminismError, NotSerializableError, StepFailedError, StepTimeoutError,
  StoreUnavailableError, TaskCancelledError, WorkerStoppingError, coerceError,
} from './errors.ts';
import type { Emit } from './events.ts';
import type { LifecycleEvent, TaskStatus } from './lifecycle.ts';
import { backoffMs, resolveRetry, shouldRetry, type RetryPolicy } from './retry.ts';
import { decodeError, decodeJson, deserializeError, encodeError, encodeJson } from './serialize.ts';
import type { ClaimedTask, SignalRow, StepKind, StepRow, TaskPatch, TaskRow, Store } from './store.ts';
import { planTransition, wakeFor } from './transitions.ts';
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
  emit: Emit;
}

/**
 * Internal control flow: thrown into workflow code when the run must stop at a step boundary.
 * As a user you should never see this error; if you catch it, rethrow it.
 */
class SuspendRun extends Error {
  constructor(why: string) {
    super(`Stepwise is suspending this run (${why}); rethrow this error if you catch it.`);
    this.name = 'SuspendRun';
  }
}

/** What the run should become when it stops at a boundary. */
type SuspendKind = 'park' | 'pause' | 'drain';

interface ParkRequest {
  wakeAt: number | null;
  wait: Record<string, unknown>;
  waitEvent: string | null;
}

interface Position {
  seq: number;
  stepId: string;
  occurrence: number;
  recorded: StepRow | undefined;
}

const STEP_NAME = /^[^#\s][^#]{0,199}$/;

export class TaskRun {
  readonly taskId: string;
  readonly epoch: number;
  readonly workflow: Workflow;
  readonly #task: TaskRow;
  readonly #deps: RunDeps;
  readonly #journal = new Map<number, StepRow>();
  readonly #signals: SignalRow[];
  readonly #controller = new AbortController();
  readonly #defaultRetry: RetryPolicy;
  readonly #inflight = new Set<Promise<unknown>>();
  /** Rows written together with the transition that ends the run (retry schedules, waits). */
  readonly #endRows = new Map<number, StepRow>();
  #seq = 0;
  readonly #occurrences = new Map<string, number>();
  #suspend: SuspendKind | null = null;
  #suspended = false;
  #park: ParkRequest | null = null;
  #fatal: Error | null = null;
  #cancelReason: string | undefined;
  #cancelled = false;
  #leaseLost = false;
  #halt: Error | null = null;
  #haltPromise: Promise<void>;
  #onHalt!: () => void;

  constructor(claimed: ClaimedTask, workflow: Workflow, deps: RunDeps) {
    this.#task = claimed.task;
    this.taskId = claimed.task.id;
    this.epoch = claimed.task.epoch;
    this.workflow = workflow;
    this.#deps = deps;
    for (const s of claimed.steps) this.#journal.set(s.seq, s);
    this.#signals = [...claimed.signals];
    this.#defaultRetry = resolveRetry(workflow.options.retry);
    this.#haltPromise = new Promise<void>((resolve) => (this.#onHalt = resolve));
    if (claimed.task.status === 'cancelling') this.cancel(claimed.task.cancelReason ?? undefined);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  // --- commands from the worker ---------------------------------------------------------------

  /** The task was cancelled: fire the signal; the run ends `cancelled`. */
  cancel(reason: string | undefined): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#cancelReason = reason;
    this.#haltWith(new TaskCancelledError(this.taskId, reason));
  }

  /** Another worker owns the task now: stop at once, write nothing. */
  loseLease(): void {
    if (this.#leaseLost) return;
    this.#leaseLost = true;
    this.#haltWith(new LeaseLostError(this.taskId, this.epoch));
  }

  /** Stop at the next step boundary and end `paused`. */
  requestPause(): void {
    if (this.#suspend === null || this.#suspend === 'drain' || this.#suspend === 'park') this.#suspend = 'pause';
  }

  /** The pause request was withdrawn before the run honoured it. */
  withdrawPause(): void {
    if (this.#suspend === 'pause') this.#suspend = this.#park ? 'park' : null;
  }

  /** The worker is stopping: start no new step; in-flight steps may finish. */
  drain(): void {
    if (this.#suspend === null) this.#suspend = 'drain';
  }

  /** The worker's grace period is over: fire the signal; the task goes back to pending. */
  abortForShutdown(): void {
    this.#haltWith(new WorkerStoppingError());
  }

  #haltWith(error: Error): void {
    if (this.#halt) return;
    this.#halt = error;
    this.#controller.abort(error);
    this.#onHalt();
  }

  // --- the run ----------------------------------------------------------------------------------

  /** Runs the workflow to its next stopping point and writes the outcome. Never throws. */
  async execute(): Promise<TaskStatus | 'lease-lost'> {
    const ctx = this.#context();
    let result: { ok: true; value: unknown } | { ok: false; error: unknown } | null = null;
    const fnDone = Promise.resolve()
      .then(() => this.workflow.fn(ctx, decodeJson(this.#task.input)))
      .then(
        (value) => (result = { ok: true, value }),
        (error: unknown) => (result = { ok: false, error }),
      );
    await Promise.race([fnDone, this.#haltPromise.then(() => this.#grace(fnDone))]);
    await this.#settleInflight();
    try {
      return await this.#finish(result);
    } catch (e) {
      // The outcome could not be written (database unreachable): the lease will expire and the
      // task will be resumed from its last checkpoint by whichever worker claims it.
      this.#deps.emit('worker:error', { error: coerceError(e), during: `finishing task ${this.taskId}` });
      return 'lease-lost';
    }
  }

  /** After a halt, give the function and its steps `cancelGraceMs` to settle. */
  async #grace(work: Promise<unknown>): Promise<void> {
    const timer = new AbortController();
    await Promise.race([work, this.#deps.clock.sleep(this.#deps.cancelGraceMs, timer.signal).catch(() => undefined)]);
    timer.abort();
  }

  async #settleInflight(): Promise<void> {
    while (this.#inflight.size) {
      const all = Promise.allSettled([...this.#inflight]);
      if (this.#halt) await this.#grace(all);
      else await all;
      if (this.#halt) return;
    }
  }

  async #finish(result: { ok: true; value: unknown } | { ok: false; error: unknown } | null): Promise<TaskStatus | 'lease-lost'> {
    if (this.#leaseLost) return this.#lost();
    if (this.#cancelled) return this.#end('abort', { detail: { reason: this.#cancelReason ?? null } });
    if (this.#fatal) return this.#end('fail', { set: { error: encodeError(this.#fatal) }, detail: { error: this.#fatal.message } });
    const rows = [...this.#endRows.values()];
    if (this.#halt) return this.#end('release', { steps: rows, detail: { reason: this.#halt.message } });
    if (this.#suspended || (result && !result.ok && result.error instanceof SuspendRun)) {
      if (this.#suspend === 'pause') return this.#end('suspend', { steps: rows, detail: { reason: 'pause requested' } });
      if (this.#park && this.#suspend !== 'drain') {
        const p = this.#park;
        return this.#end('park', {
          steps: rows,
          set: { runAt: p.wakeAt, wait: JSON.stringify(p.wait), waitEvent: p.waitEvent },
          detail: p.wait,
        });
      }
      return this.#end('release', { steps: rows, detail: { reason: this.#suspend === 'drain' ? 'worker stopping' : 'pause withdrawn' } });
    }
    if (!result) return this.#end('release', { steps: rows, detail: { reason: 'run did not settle' } });
    if (!result.ok) {
      const error = coerceError(result.error);
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
      output = encodeJson(result.value, `The output of workflow "${this.workflow.name}"`);
    } catch (e) {
      return this.#end('fail', { set: { error: encodeError(e) }, detail: { error: (e as Error).message } });
    }
    return this.#end('complete', { set: { output } });
  }

  #lost(): 'lease-lost' {
    this.#deps.emit('lease:lost', { taskId: this.taskId, epoch: this.epoch });
    return 'lease-lost';
  }

  /** Writes the run's last transition, fenced by the epoch; follows a concurrent cancel. */
  async #end(requested: LifecycleEvent, opts: { set?: TaskPatch; detail?: unknown; steps?: StepRow[] }): Promise<TaskStatus | 'lease-lost'> {
    let status: TaskStatus = this.#cancelled ? 'cancelling' : 'running';
    let event = requested;
    for (let i = 0; i < 4; i++) {
      const ev: LifecycleEvent = status === 'cancelling' ? 'abort' : event;
      const { write } = planTransition({
        taskId: this.taskId,
        state: { status, pauseRequested: event === 'suspend' },
        event: ev,
        guard: { epoch: this.epoch },
        at: this.#deps.clock.now(),
        set: ev === event ? opts.set : {},
        detail: ev === event ? opts.detail : { reason: this.#cancelReason ?? null },
        workerId: this.#deps.workerId,
        steps: ev === 'abort' ? [] : opts.steps,
        notify: (edge) => wakeFor(edge, this.taskId, this.workflow.name),
      });
      const row = (await this.#deps.writer.write(write)) as TaskRow | null;
      if (row) return row.status;
      const fresh = await this.#deps.store.getTask(this.taskId);
      if (!fresh || fresh.epoch !== this.epoch || (fresh.status !== 'running' && fresh.status !== 'cancelling')) return this.#lost();
      status = fresh.status;
      // A pause withdrawn before the run stopped: hand the task back instead of parking it paused.
      if (event === 'suspend' && !fresh.pauseRequested) event = 'release';
    }
    return this.#lost();
  }

  #who(): string {
    const started = this.#task.workflowVersion;
    const now = this.workflow.version;
    return `Task ${this.taskId} (workflow "${this.workflow.name}" version ${now}${started !== now ? `, started under version ${started}` : ''})`;
  }

  // --- the context given to workflow code ------------------------------------------------------

  #context(): WorkflowContext {
    return Object.freeze({
      taskId: this.taskId,
      workflow: this.workflow.name,
      workflowVersion: this.workflow.version,
      signal: this.#controller.signal,
      step: <T>(name: string, fn: (s: StepContext) => Promise<T> | T, options?: StepOptions) => this.#step(name, fn, options),
      sleep: (name: string, duration: Duration) => this.#sleep(name, duration),
      waitForEvent: <T>(name: string, options?: WaitForEventOptions) => this.#waitForEvent<T>(name, options),
    });
  }

  /** Takes the next journal position for a call; checks it against the journal. */
  #position(name: string, kind: StepKind): Position {
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      throw this.#fail(
        new NonDeterminismError(this.taskId, this.#seq, `${kind} name ${JSON.stringify(name)} is not valid: use 1-200 characters without "#" (it marks repeats: fetch, fetch#2).`),
      );
    }
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
            'The workflow code changed incompatibly while the task was in flight; give the new code a new workflow version and let old tasks finish on the old code.',
        ),
      );
    }
    return { seq, stepId, occurrence, recorded };
  }

  /** Marks the run as failed for good, whatever the workflow code does with the error. */
  #fail(error: Error): Error {
    this.#fatal ??= error;
    return error;
  }

  /** Throws if no new step may start: the run is halted or must stop at this boundary. */
  #checkBoundary(): void {
    if (this.#fatal) throw this.#fatal;
    if (this.#halt) throw this.#halt;
    if (this.#suspend !== null) {
      this.#suspended = true;
      throw new SuspendRun(this.#suspend === 'park' ? 'waiting' : this.#suspend === 'pause' ? 'paused' : 'worker stopping');
    }
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#inflight.add(p);
    const done = (): void => void this.#inflight.delete(p);
    p.then(done, done);
    return p;
  }

  #row(seq: number, stepId: string, kind: StepKind, fields: Partial<StepRow>): StepRow {
    return {
      taskId: this.taskId, seq, name: stepId, kind, status: 'completed', output: null, error: null,
      attempts: 0, startedAt: null, finishedAt: null, wakeAt: null, epoch: this.epoch, ...fields,
    };
  }

  /** A fenced journal write; a refused write means the lease is lost. */
  async #checkpoint(row: StepRow, consume?: { signalId: number; seq: number }): Promise<void> {
    let accepted: unknown;
    try {
      accepted = await this.#deps.writer.write({ kind: 'step', taskId: this.taskId, epoch: this.epoch, step: row, ...(consume ? { consume } : {}) });
    } catch (e) {
      // Not the step's fault: stop the run; the task resumes from its last checkpoint.
      this.#haltWith(new StoreUnavailableError(`Could not checkpoint step "${row.name}" of task ${this.taskId}: ${coerceError(e).message}`, { cause: e }));
      throw this.#halt as Error;
    }
    if (!accepted) {
      this.loseLease();
      throw this.#halt as Error;
    }
  }

  /** Stops the run at this boundary until `wakeAt`; `row` is written with the park transition. */
  #parkUntil(req: ParkRequest, row: StepRow): never {
    this.#endRows.set(row.seq, row);
    if (!this.#park) this.#park = req;
    else if (req.wakeAt !== null && (this.#park.wakeAt === null || req.wakeAt < this.#park.wakeAt)) {
      this.#park = { ...req, waitEvent: this.#park.waitEvent ?? req.waitEvent };
    }
    if (this.#suspend === null) this.#suspend = 'park';
    this.#suspended = true;
    throw new SuspendRun('waiting');
  }

  /** Waits in-process when short, parks the task when long. */
  async #waitUntil(wakeAt: number, req: ParkRequest, row: StepRow): Promise<void> {
    const remaining = wakeAt - this.#deps.clock.now();
    if (remaining <= 0) return;
    if (remaining > this.#deps.parkAfterMs) this.#parkUntil(req, row);
    try {
      await this.#deps.clock.sleep(remaining, this.#controller.signal);
    } catch {
      throw this.#halt ?? new Error('sleep interrupted');
    }
  }

  // --- ctx.step ---------------------------------------------------------------------------------

  #step<T>(name: string, fn: (s: StepContext) => Promise<T> | T, options: StepOptions = {}): Promise<T> {
    let pos: Position;
    try {
      pos = this.#position(name, 'step');
      if (pos.recorded?.status === 'completed') return Promise.resolve(decodeJson(pos.recorded.output) as T);
      if (pos.recorded?.status === 'failed') {
        const err = deserializeError(decodeError(pos.recorded.error as string));
        return Promise.reject(new StepFailedError(pos.stepId, pos.recorded.attempts, err));
      }
      if (typeof fn !== 'function') throw this.#fail(new TypeError(`ctx.step("${name}"): the second argument must be a function`));
      this.#checkBoundary();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#track(this.#execute(pos.seq, pos.stepId, pos.occurrence, name, fn, options, pos.recorded));
  }

  async #execute<T>(
    seq: number, stepId: string, occurrence: number, name: string,
    fn: (s: StepContext) => Promise<T> | T, options: StepOptions, recorded: StepRow | undefined,
  ): Promise<T> {
    const { clock, emit, parkAfterMs } = this.#deps;
    const policy = options.retry === undefined ? this.#defaultRetry : resolveRetry(options.retry, this.#defaultRetry);
    const timeoutMs = optionalMs(options.timeout, `timeout of step "${stepId}"`);
    const idempotencyKey = `v1:${this.taskId}:${name}#${occurrence}`;
    let attempt = recorded?.status === 'retrying' ? recorded.attempts : 0;
    let lastError: Error | undefined = recorded?.error ? deserializeError(decodeError(recorded.error)) : undefined;
    const firstStart = recorded?.startedAt ?? clock.now();
    if (recorded?.status === 'retrying' && recorded.wakeAt !== null) {
      await this.#waitUntil(recorded.wakeAt, this.#retryWait(stepId, attempt + 1, recorded.wakeAt), recorded);
    }
    for (;;) {
      attempt++;
      const started = clock.now();
      emit('step:started', { taskId: this.taskId, step: stepId, attempt });
      let value: T;
      try {
        value = await this.#attempt(fn, { idempotencyKey, attempt, lastError, stepId }, timeoutMs);
      } catch (raw) {
        if (this.#halt) throw this.#halt;
        const error = coerceError(raw);
        if (!shouldRetry(policy, error, attempt)) {
          emit('step:failed', { taskId: this.taskId, step: stepId, attempt, error });
          await this.#checkpoint(this.#row(seq, stepId, 'step', {
            status: 'failed', error: encodeError(error), attempts: attempt, startedAt: firstStart, finishedAt: clock.now(),
          }));
          throw new StepFailedError(stepId, attempt, error);
        }
        const delayMs = backoffMs(policy, attempt, error);
        const wakeAt = clock.now() + delayMs;
        const parked = delayMs > parkAfterMs;
        emit('step:retrying', { taskId: this.taskId, step: stepId, attempt, delayMs, error, parked });
        lastError = error;
        const row = this.#row(seq, stepId, 'step', {
          status: 'retrying', error: encodeError(error), attempts: attempt, startedAt: firstStart, wakeAt,
        });
        await this.#waitUntil(wakeAt, this.#retryWait(stepId, attempt + 1, wakeAt), row);
        continue;
      }
      let output: string | null;
      try {
        output = encodeJson(value, `The output of step "${stepId}"`);
      } catch (e) {
        const error = e as NotSerializableError;
        emit('step:failed', { taskId: this.taskId, step: stepId, attempt, error });
        await this.#checkpoint(this.#row(seq, stepId, 'step', {
          status: 'failed', error: encodeError(error), attempts: attempt, startedAt: firstStart, finishedAt: clock.now(),
        }));
        throw new StepFailedError(stepId, attempt, error);
      }
      const finishedAt = clock.now();
      await this.#checkpoint(this.#row(seq, stepId, 'step', { output, attempts: attempt, startedAt: firstStart, finishedAt }));
      emit('step:completed', { taskId: this.taskId, step: stepId, attempt, durationMs: finishedAt - started });
      return (output === null ? undefined : JSON.parse(output)) as T;
    }
  }

  #retryWait(stepId: string, nextAttempt: number, wakeAt: number): ParkRequest {
    return { wakeAt, wait: { kind: 'retry', step: stepId, attempt: nextAttempt, until: wakeAt }, waitEvent: null };
  }

  /** One attempt: resolves with the step's value, rejects with its error, its timeout or the halt reason. */
  #attempt<T>(
    fn: (s: StepContext) => Promise<T> | T,
    a: { idempotencyKey: string; attempt: number; lastError: Error | undefined; stepId: string },
    timeoutMs: number | undefined,
  ): Promise<T> {
    const runSignal = this.#controller.signal;
    const timeout = timeoutMs === undefined ? undefined : new AbortController();
    const signal = timeout ? AbortSignal.any([runSignal, timeout.signal]) : runSignal;
    const ctx: StepContext = Object.freeze({
      signal, idempotencyKey: a.idempotencyKey, attempt: a.attempt, lastError: a.lastError, taskId: this.taskId, stepName: a.stepId, epoch: this.epoch,
    });
    if (runSignal.aborted) return Promise.reject(runSignal.reason);
    if (!timeout || timeoutMs === undefined) {
      // Fast path (no timeout): race the step against the run's signal only.
      return new Promise<T>((resolve, reject) => {
        const onAbort = (): void => reject(runSignal.reason);
        runSignal.addEventListener('abort', onAbort, { once: true });
        let result: Promise<T> | T;
        try {
          result = fn(ctx);
        } catch (e) {
          runSignal.removeEventListener('abort', onAbort);
          return reject(e);
        }
        Promise.resolve(result).then(
          (v) => {
            runSignal.removeEventListener('abort', onAbort);
            resolve(v);
          },
          (e: unknown) => {
            runSignal.removeEventListener('abort', onAbort);
            reject(e);
          },
        );
      });
    }
    return new Promise<T>((resolve, reject) => {
      const timerStop = new AbortController();
      const cleanup = (): void => {
        signal.removeEventListener('abort', onAbort);
        timerStop.abort(null);
      };
      const onAbort = (): void => {
        cleanup();
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#deps.clock.sleep(timeoutMs, timerStop.signal).then(
        () => timeout.abort(new StepTimeoutError(a.stepId, timeoutMs)),
        () => undefined,
      );
      Promise.resolve()
        .then(() => fn(ctx))
        .then(
          (v) => {
            cleanup();
            resolve(v);
          },
          (e: unknown) => {
            cleanup();
            reject(e);
          },
        );
    });
  }

  // --- ctx.sleep ------------------------------------------------------------------------------

  async #sleep(name: string, duration: Duration): Promise<void> {
    const { seq, stepId, recorded } = this.#position(name, 'sleep');
    const now = this.#deps.clock.now();
    if (recorded) {
      if (recorded.wakeAt === null || recorded.wakeAt <= now) return;
    } else {
      this.#checkBoundary();
    }
    const ms = toMs(duration, `duration of sleep "${stepId}"`);
    const row = recorded ?? this.#row(seq, stepId, 'sleep', { status: 'waiting', startedAt: now, wakeAt: now + ms });
    const wakeAt = row.wakeAt as number;
    const req: ParkRequest = { wakeAt, wait: { kind: 'sleep', step: stepId, until: wakeAt }, waitEvent: null };
    if (!recorded) {
      if (ms > this.#deps.parkAfterMs) this.#parkUntil(req, row);
      await this.#checkpoint(row);
    }
    await this.#waitUntil(wakeAt, req, row);
  }

  // --- ctx.waitForEvent -------------------------------------------------------------------------

  async #waitForEvent<T>(name: string, options: WaitForEventOptions = {}): Promise<EventResult<T>> {
    const { seq, stepId, recorded } = this.#position(name, 'event');
    if (recorded?.status === 'completed') return decodeJson(recorded.output) as EventResult<T>;
    const now = this.#deps.clock.now();
    if (!recorded) this.#checkBoundary();
    const timeoutMs = optionalMs(options.timeout, `timeout of waitForEvent "${stepId}"`);
    const deadline = recorded ? recorded.wakeAt : timeoutMs === undefined ? null : now + timeoutMs;
    const startedAt = recorded?.startedAt ?? now;
    const index = this.#signals.findIndex((s) => s.name === name);
    if (index >= 0) {
      const [signal] = this.#signals.splice(index, 1) as [SignalRow];
      const result: EventResult<T> = { timedOut: false, payload: decodeJson(signal.payload) as T };
      await this.#checkpoint(
        this.#row(seq, stepId, 'event', { output: JSON.stringify(result), startedAt, finishedAt: now, wakeAt: deadline }),
        { signalId: signal.id, seq },
      );
      return result;
    }
    if (deadline !== null && deadline <= now) {
      const result: EventResult<T> = { timedOut: true };
      await this.#checkpoint(this.#row(seq, stepId, 'event', { output: JSON.stringify(result), startedAt, finishedAt: now, wakeAt: deadline }));
      return result;
    }
    const row = recorded ?? this.#row(seq, stepId, 'event', { status: 'waiting', startedAt, wakeAt: deadline });
    return this.#parkUntil({ wakeAt: deadline, wait: { kind: 'event', event: name, step: stepId, until: deadline }, waitEvent: name }, row);
  }
}
