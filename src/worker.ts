/**
 * @module worker
 * A worker claims due tasks, holds a lease on each (renewed by a heartbeat that runs on its own
 * timer, so a ten-minute LLM call keeps its lease), runs them, and writes each run's outcome.
 *
 * Lease and heartbeat lengths trade two failures against each other: a lease that is too short
 * expires under a slow event loop and lets a second worker run the same step concurrently (the
 * first one's checkpoint is then refused by fencing, but its side effect may already have
 * happened); a lease that is too long delays the resumption of a crashed worker's tasks. The
 * defaults (30 s lease, heartbeat every 2 s) tolerate a 28 s stall and resume a dead worker's
 * tasks within ~30 s. The heartbeat also carries cancel and pause requests from other processes,
 * so they arrive within one heartbeat.
 *
 * Worker lifecycle: created → running → stopping → stopped. `stop()` drains: no new claims, runs
 * stop at their next step boundary, in-flight steps may finish within `shutdownGraceMs`; after
 * that their signals fire, and every unfinished task is released (back to pending) so that
 * another worker resumes it at once instead of waiting for the lease to expire.
 */
import { DwellScanner } from './dwell/scanner.ts';
import { ApprovalCloser } from './approvals/closer.ts';
import { DEFAULT_SWEEP_MS, MAX_SWEEP_MS, Sweeper } from './sweeper.ts';
import { sweepDeletions, resolveRetention, type RetentionMs } from './retention/policy.ts';
import { sweepOnce } from './retention/purge.ts';
import { hostname } from 'node:os';
import type { Clock } from './clock.ts';
import { ClosedError, InvalidArgumentError, coerceError } from './errors.ts';
import { TypedEmitter, type WorkerEvents } from './events.ts';
import { shortId } from './ids.ts';
import { isFinished, sourcesOf, transition } from './lifecycle.ts';
import { TaskRun } from './run/task-run.ts';
import { workflowCode } from './primitives/context.ts';
import type { ClaimedTask, Store, WriteResult } from './store.ts';
import { effectColumns, planTransition, wakeFor } from './transitions.ts';
import { encodeError } from './serialize.ts';
import { WriteBatcher } from './write-batcher.ts';
import type { Workflow } from './workflow.ts';
import type { LocalBus } from './local-bus.ts';
import { observeWorker, type Observer } from './observers.ts';
import type { Idempotency } from './idempotency/run.ts';
import { checkText } from './text-rules.ts';
import { DEFAULT_LIMITS } from './limits.ts';

export interface WorkerOptions {
  /** Tasks run at once by this worker. @defaultValue 8 */
  concurrency?: number;
  /**
   * Most tasks taken by one claim; a claim never takes more than the free slots, so a worker does
   * not hold tasks it cannot start. Filling every free slot at once keeps claims few when many
   * workers share a queue (smaller claims made each worker claim several times in a row, each
   * claimer skipping the rows the others had locked).
   * @defaultValue 256
   */
  claimBatch?: number;
  /** Serve only these workflows (names). @defaultValue every workflow registered with the engine */
  workflows?: readonly string[];
  /** A stable name for this worker in leases and history. @defaultValue `<hostname>-<pid>-<random>` */
  workerId?: string;
  /**
   * Lease length. A task whose worker stops heartbeating is resumed by another worker this long
   * after its last heartbeat. @defaultValue 30000
   */
  leaseMs?: number;
  /**
   * Heartbeat period: renews leases and picks up cancel/pause requests. At most a third of the
   * lease: a run that has not renewed its lease for `leaseMs − 2 × heartbeatMs` stops itself.
   * @defaultValue min(2000, leaseMs / 3)
   */
  heartbeatMs?: number;
  /**
   * How often an idle worker looks for due tasks. Tasks started, resumed or signalled through an
   * engine in the same process (or, on PostgreSQL, anywhere) wake it at once. @defaultValue 500
   */
  pollIntervalMs?: number;
  /** `stop()` lets in-flight steps finish for this long before firing their signals. @defaultValue 10000 */
  shutdownGraceMs?: number;
  /** After a run's signal fires, how long it may take to settle before it is abandoned. @defaultValue 5000 */
  cancelGraceMs?: number;
  /** Waits (retry backoff, sleep) longer than this park the task instead of holding a slot. @defaultValue 5000 */
  parkAfterMs?: number;
  /**
   * How often the worker's dwell scanner looks for tasks past their workflow's `dwell` bounds, and
   * its closer for open approvals of ended tasks. @defaultValue 1000
   */
  dwellScanMs?: number;
  /**
   * How often the worker deletes idempotency records whose time to live has passed (they already
   * count as absent; this keeps the table from growing). `0` turns it off. @defaultValue 600000
   */
  idempotencyPurgeMs?: number;
  /**
   * How often the worker deletes the finished tasks of its workflows that are past their retention
   * (`EngineOptions.retention`, a workflow's `retention`); without a retention, it deletes none.
   * `0` turns it off. @defaultValue 600000
   */
  retentionSweepMs?: number;
  /** @internal For tests: how long a replay waits for the call its journal says comes next. @defaultValue 30000 */
  replayStallMs?: number;
}

export type WorkerState = 'created' | 'running' | 'stopping' | 'stopped';

/** @internal What a worker needs from its engine. */
export interface WorkerHost {
  store: () => Promise<Store>;
  clock: Clock;
  workflows: () => ReadonlyMap<string, Workflow>;
  bus: LocalBus;
  observers?: readonly Observer[];
  /** Idempotency records for steps with a business key (kept in the store). */
  idempotency?: Idempotency;
  /** The largest step or task output, in bytes of JSON. @defaultValue DEFAULT_LIMITS.outputBytes */
  outputBytes?: number;
  /** The engine's retention of finished tasks (workflows may override it). @defaultValue keep all */
  retention?: RetentionMs;
  onStopped: (worker: Worker) => void;
}

/**
 * The default worker id, `<host>-<pid>-<random>`: it names the host and process that hold a lease,
 * so that a worker starting on the same host can tell a dead owner's leases (see `start()`).
 */
export function localWorkerId(pid: number, suffix: string): string {
  return `${hostname()}-${pid}-${suffix}`;
}

/** The pid of a default worker id of this host, or null (another host, or a custom id). */
function localPid(owner: string): number | null {
  const host = hostname();
  if (!owner.startsWith(`${host}-`)) return null;
  const m = /^(\d+)-[a-z0-9]+$/.exec(owner.slice(host.length + 1));
  return m ? Number(m[1]) : null;
}

/** Whether process `pid` of this host is alive (a process we may not signal is alive). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === 'EPERM';
  }
}

const positive = (name: string, v: number): number => {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new InvalidArgumentError(`worker option ${name} must be a positive number, got ${String(v)}`);
  return v;
};
/** The interval of a sweep: 0 (off) or milliseconds a timer can wait. */
const sweepMs = (name: string, v: number | undefined): number => {
  if (v === undefined) return DEFAULT_SWEEP_MS;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_SWEEP_MS) {
    throw new InvalidArgumentError(`${name} must be a number of milliseconds from 1 to ${MAX_SWEEP_MS} (about 24.8 days), or 0 to turn it off; got ${String(v)}.`);
  }
  return v;
};
/** Counts (tasks, claims): a fraction would be floored to a worker that never claims. */
const positiveInt = (name: string, v: number): number => {
  if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError(`worker option ${name} must be a whole number ≥ 1, got ${String(v)}`);
  return v;
};

export class Worker {
  readonly id: string;
  readonly #host: WorkerHost;
  readonly #concurrency: number;
  readonly #claimBatch: number;
  readonly #only: readonly string[] | undefined;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #pollIntervalMs: number;
  readonly #shutdownGraceMs: number;
  readonly #cancelGraceMs: number;
  readonly #replayStallMs: number | undefined;
  readonly #parkAfterMs: number;
  readonly #dwellScanMs: number;
  #dwell: DwellScanner | null = null;
  #approvalCloser: ApprovalCloser | null = null;
  readonly #purgeMs: number;
  #purger: Sweeper | null = null;
  readonly #retentionSweepMs: number;
  #retentionSweeper: Sweeper | null = null;
  readonly #events = new TypedEmitter<WorkerEvents>();
  readonly #runs = new Map<string, TaskRun>();
  readonly #running = new Set<Promise<void>>();
  /** Last successful heartbeat (or claim) time per task, for self-fencing when heartbeats fail. */
  readonly #renewedAt = new Map<string, number>();
  #state: WorkerState = 'created';
  #store: Store | null = null;
  #writer: WriteBatcher | null = null;
  #workflows = new Map<string, Workflow>();
  #wake: (() => void) | null = null;
  #woken = false;
  /**
   * Whether due tasks may be left behind: the last claim took all it asked for (or failed). While
   * it is false, a run that finishes does not make the worker look again (nothing was left; new
   * work announces itself by a notification or is found by the poll).
   */
  #backlog = true;
  #loop: Promise<void> | null = null;
  #heartbeat: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  /** The fallback for cancelling tasks nobody takes over (see {@link #abandonCancelling}), while it runs. */
  #abandoning: Promise<unknown> | null = null;
  #unsubscribe: Array<() => void | Promise<void>> = [];

  /** @internal Use `engine.worker(options)`. */
  constructor(host: WorkerHost, options: WorkerOptions = {}) {
    this.#host = host;
    this.id = options.workerId ?? localWorkerId(process.pid, shortId());
    if (typeof this.id !== 'string' || !this.id || this.id.length > 200) throw new InvalidArgumentError('worker option workerId must be a string of 1-200 characters.');
    checkText(this.id, 'The workerId');
    this.#concurrency = positiveInt('concurrency', options.concurrency ?? 8);
    this.#claimBatch = positiveInt('claimBatch', options.claimBatch ?? 256);
    this.#only = options.workflows;
    this.#leaseMs = positive('leaseMs', options.leaseMs ?? 30_000);
    this.#heartbeatMs = positive('heartbeatMs', options.heartbeatMs ?? Math.min(2000, this.#leaseMs / 3));
    if (this.#heartbeatMs * 3 > this.#leaseMs) {
      throw new InvalidArgumentError(
        `heartbeatMs (${this.#heartbeatMs}) must be at most a third of leaseMs (${this.#leaseMs}): a run stops itself two heartbeats before its lease could expire.`,
      );
    }
    this.#pollIntervalMs = positive('pollIntervalMs', options.pollIntervalMs ?? 500);
    this.#shutdownGraceMs = options.shutdownGraceMs ?? 10_000;
    this.#cancelGraceMs = options.cancelGraceMs ?? 5000;
    this.#replayStallMs = options.replayStallMs;
    this.#parkAfterMs = options.parkAfterMs ?? 5000;
    this.#dwellScanMs = options.dwellScanMs ?? 1000;
    this.#purgeMs = sweepMs('idempotencyPurgeMs', options.idempotencyPurgeMs);
    this.#retentionSweepMs = sweepMs('retentionSweepMs', options.retentionSweepMs);
  }

  get state(): WorkerState {
    return this.#state;
  }

  /** Tasks this worker is running now. */
  get inFlight(): number {
    return this.#runs.size;
  }

  /** @internal Whether this worker is running `taskId` now (its run will announce its end here). */
  holds(taskId: string): boolean {
    return this.#runs.has(taskId);
  }

  on<K extends keyof WorkerEvents & string>(name: K, listener: (payload: WorkerEvents[K]) => void): () => void {
    return this.#events.on(name, listener);
  }

  /** Starts claiming and running tasks. Resolves once the worker is running. */
  async start(): Promise<void> {
    if (this.#state !== 'created') throw new ClosedError(`Worker ${this.id} (${this.#state}) cannot start again; it`);
    const store = await this.#host.store();
    this.#store = store;
    const all = this.#host.workflows();
    const names = this.#only ?? [...all.keys()];
    for (const name of names) {
      const wf = all.get(name);
      if (!wf) throw new InvalidArgumentError(`Worker asked to serve "${name}", which is not registered with the engine (registered: ${[...all.keys()].join(', ') || 'none'}).`);
      this.#workflows.set(name, wf);
    }
    if (!this.#workflows.size) throw new InvalidArgumentError('This worker has no workflows to run: pass them to new Engine({ workflows }).');
    await store.registerWorkflows([...this.#workflows.values()].map((w) => ({ name: w.name, version: w.version, at: this.#host.clock.now() })));
    this.#writer = new WriteBatcher(store, {
      maxInFlight: store.parallelWrites,
      alone: () => this.#runs.size <= 1,
      onRetry: (error, attempt) => this.#events.emit('worker:error', { error: coerceError(error), during: `writing checkpoints (attempt ${attempt})` }),
      onCommitted: (ops, results) => {
        this.#appended(ops);
        this.#finished(results);
      },
    });
    if (this.#host.observers?.length) this.#unsubscribe.push(observeWorker((name, fn) => this.#events.on(name, fn), this.id, this.#host.observers));
    await this.#endDeadLocalLeases(store);
    this.#state = 'running';
    this.#subscribe();
    this.#heartbeat = setInterval(() => void this.#beat(), this.#heartbeatMs);
    this.#loop = this.#claimLoop();
    // One dwell scanner per worker, for the workflows it serves that bound their dwell.
    if ([...this.#workflows.values()].some((w) => w.options.dwell)) {
      this.#dwell = new DwellScanner({
        store, clock: this.#host.clock, workflows: () => this.#workflows.values(),
        changed: (taskId) => this.#host.bus.emit('task:settled', { taskId, status: '' }),
        cancelled: (taskId, reason) => this.#host.bus.emit('task:cancel', { taskId, reason }),
        onError: (error) => this.#events.emit('worker:error', { error, during: 'scanning dwell timeouts' }),
      }, this.#dwellScanMs);
      this.#dwell.start();
    }
    // Open approvals of tasks that ended are closed (see approvals/closer.ts).
    this.#approvalCloser = new ApprovalCloser(store, this.#host.clock, this.#dwellScanMs, (e) =>
      this.#events.emit('worker:error', { error: coerceError(e), during: 'closing the approvals of ended tasks' }));
    this.#approvalCloser.start();
    // Expired idempotency records are deleted by every worker (see sweeper.ts).
    const idempotency = this.#host.idempotency;
    if (idempotency && this.#purgeMs > 0) {
      this.#purger = new Sweeper({
        purge: (limit) => idempotency.purge(limit), intervalMs: this.#purgeMs,
        onError: (e) => this.#events.emit('worker:error', { error: coerceError(e), during: 'deleting expired idempotency records' }),
      });
      this.#purger.start();
    }
    // Finished tasks past their retention, of the workflows this worker serves (retention/).
    const retention = this.#host.retention ?? {};
    const kept = [...this.#workflows.values()].map((w) => ({
      name: w.name, ...(w.options.retention ? { retention: resolveRetention(w.options.retention, w.name) } : {}),
    }));
    const deletions = (now: number) => sweepDeletions(now, retention, kept);
    // No workflow here keeps any status for a limited time: there is nothing to sweep.
    if (this.#retentionSweepMs > 0 && deletions(0).length) {
      const deps = { store, clock: this.#host.clock, observers: this.#host.observers ?? [] };
      const by = { kind: 'worker' as const, id: this.id };
      this.#retentionSweeper = new Sweeper({
        purge: (limit) => sweepOnce(deps, deletions(this.#host.clock.now()), limit, by),
        intervalMs: this.#retentionSweepMs,
        stopsFor: () => false,
        onError: (e) => this.#events.emit('worker:error', { error: coerceError(e), during: 'deleting finished tasks past their retention' }),
      });
      this.#retentionSweeper.start();
    }
    this.#events.emit('worker:started', { workerId: this.id, workflows: [...this.#workflows.keys()] });
  }

  #subscribe(): void {
    const bus = this.#host.bus;
    this.#unsubscribe.push(
      bus.on('task:ready', ({ taskId, workflow }) => {
        // A task made runnable, or a signal sent to one: a run of it here may be waiting for it.
        this.#runs.get(taskId)?.signalArrived();
        if (!workflow || this.#workflows.has(workflow)) this.#poke();
      }),
      bus.on('task:cancel', ({ taskId, reason }) => this.#runs.get(taskId)?.cancel(reason ?? undefined)),
      bus.on('task:pause', ({ taskId }) => this.#runs.get(taskId)?.requestPause()),
      bus.on('task:resume', ({ taskId }) => this.#runs.get(taskId)?.withdrawPause()),
    );
  }

  /** Tells this process's log readers that entries of these tasks were committed. */
  #appended(written: readonly { taskId?: string; id?: string }[]): void {
    const bus = this.#host.bus;
    if (!bus.hears('log:appended')) return;
    for (const w of written) bus.emit('log:appended', { taskId: (w.taskId ?? w.id) as string });
  }

  /**
   * Hands the rows of tasks that committed writes finished to this process's `result()` waiters,
   * as committed: they need not read them back.
   */
  #finished(results: readonly WriteResult[]): void {
    const bus = this.#host.bus;
    if (!bus.hears('task:settled')) return;
    for (const r of results) if (typeof r === 'object' && r !== null && isFinished(r.status)) bus.emit('task:settled', { taskId: r.id, status: r.status, row: r });
  }

  /**
   * Leases held by a worker process of this host that is no longer alive (a crash, a SIGKILL) end
   * now instead of at their expiry, so a worker restarted on the same host resumes their tasks at
   * once. Only default worker ids (`<host>-<pid>-…`) of this host are judged; a pid that exists is
   * taken as alive, so a reused pid only means waiting for the lease, as before.
   */
  async #endDeadLocalLeases(store: Store): Promise<void> {
    try {
      const now = this.#host.clock.now();
      for (const owner of await store.leaseOwners(now)) {
        const pid = localPid(owner);
        if (pid === null || pid === process.pid || isAlive(pid)) continue;
        await store.endLeasesOf(owner, now);
      }
    } catch (e) {
      this.#events.emit('worker:error', { error: coerceError(e), during: 'ending the leases of dead workers of this host' });
    }
  }

  /** Wakes the claim loop now. */
  #poke(): void {
    this.#woken = true;
    this.#wake?.();
  }

  async #claimLoop(): Promise<void> {
    const store = this.#store as Store;
    const claim = { from: sourcesOf('claim'), to: transition({ status: 'pending' }, 'claim').to };
    const reclaimFrom = sourcesOf('reclaim');
    const reclaim = { from: reclaimFrom, to: Object.fromEntries(reclaimFrom.map((s) => [s, transition({ status: s }, 'reclaim').to])) };
    const concurrency: Record<string, number> = {};
    const versions: Record<string, string[]> = {};
    for (const wf of this.#workflows.values()) {
      if (wf.options.concurrency) concurrency[wf.name] = wf.options.concurrency;
      versions[wf.name] = [wf.version, ...(wf.options.compatibleVersions ?? []).map(String)];
    }
    while (this.#state === 'running') {
      this.#woken = false;
      const free = this.#concurrency - this.#runs.size;
      const now = this.#host.clock.now();
      let got = 0;
      if (free > 0) {
        try {
          const claimed = await store.claim({
            workerId: this.id, now, leaseMs: this.#leaseMs, limit: Math.min(free, this.#claimBatch),
            workflows: [...this.#workflows.keys()], versions, claim, reclaim, concurrency,
          });
          got = claimed.length;
          if (got) this.#appended(claimed.map((c) => c.task));
          this.#backlog = got === Math.min(free, this.#claimBatch);
          for (const c of claimed) this.#startRun(c);
        } catch (e) {
          this.#backlog = true;
          this.#events.emit('worker:error', { error: coerceError(e), during: 'claiming tasks' });
        }
      } else {
        this.#backlog = true; // no room to look: there may be due tasks
      }
      if (this.#state !== 'running') break;
      // A full claim may have left more due tasks behind: look again at once while there is room.
      if (got > 0 && got === Math.min(free, this.#claimBatch)) continue;
      if (this.#woken) continue;
      // Room for more: sleep until the next scheduled task falls due (a delayed start, a sleep or
      // a backoff that parked), if that comes before the next poll. Notifications wake it sooner.
      // "Next" counts from the claim's own `now`: a task that fell due while the claim ran is next.
      const nextDue = free > got ? await this.#nextDue(store, now) : null;
      if (this.#woken || this.#state !== 'running') continue;
      if (nextDue !== null && nextDue <= this.#host.clock.now()) continue; // due already: claim it
      await new Promise<void>((resolve) => {
        // (An AbortController only when there is a due time to wait for, aborted without a
        // DOMException: this loop turns once per finished run when the worker is busy.)
        const until = nextDue === null ? null : new AbortController();
        const timer = setTimeout(done, this.#pollIntervalMs);
        function done(): void {
          clearTimeout(timer);
          until?.abort(null);
          resolve();
        }
        if (until && nextDue !== null) this.#host.clock.sleep(Math.max(1, nextDue - this.#host.clock.now()), until.signal).then(done, () => undefined);
        this.#wake = () => setImmediate(done);
      });
      this.#wake = null;
    }
  }

  /** When the next task of this worker's workflows falls due (null: none, or the store did not say). */
  async #nextDue(store: Store, after: number): Promise<number | null> {
    try {
      return await store.nextRunAt({ workflows: [...this.#workflows.keys()], after });
    } catch {
      return null; // the poll still comes; the claim reports what is wrong with the store
    }
  }

  #startRun(claimed: ClaimedTask): void {
    // The engine's current definition (it may have been re-registered since this worker started).
    const wf = this.#host.workflows().get(claimed.task.workflow) ?? (this.#workflows.get(claimed.task.workflow) as Workflow);
    const started = this.#host.clock.now();
    let run: TaskRun;
    try {
      run = new TaskRun(claimed, wf, {
        store: this.#store as Store,
        writer: this.#writer as WriteBatcher,
        clock: this.#host.clock,
        workerId: this.id,
        parkAfterMs: this.#parkAfterMs,
        cancelGraceMs: this.#cancelGraceMs,
        leaseSafeUntil: () => this.#safeUntil(claimed.task.id),
        emit: (name, payload) => this.#events.emit(name, payload),
        hears: (name) => this.#events.hears(name),
        outputBytes: this.#host.outputBytes ?? DEFAULT_LIMITS.outputBytes,
        idempotency: this.#host.idempotency,
        runCode: workflowCode(wf),
        replayStallMs: this.#replayStallMs,
      });
    } catch (e) {
      // A run that cannot even start would otherwise hold its lease until it expires, and again.
      void this.#failUnstartable(claimed, coerceError(e));
      return;
    }
    this.#runs.set(run.taskId, run);
    this.#renewedAt.set(run.taskId, started);
    if (this.#state === 'stopping') run.drain();
    if (this.#events.hears('run:claimed')) this.#events.emit('run:claimed', { taskId: run.taskId, workflow: wf.name, epoch: run.epoch, reclaimed: claimed.event === 'reclaim' });
    const p = run.execute().catch(() => 'lease-lost' as const).then((status) => {
      this.#runs.delete(run.taskId);
      this.#renewedAt.delete(run.taskId);
      if (this.#events.hears('run:finished')) this.#events.emit('run:finished', { taskId: run.taskId, workflow: wf.name, status, durationMs: this.#host.clock.now() - started });
      this.#host.bus.emit('task:settled', { taskId: run.taskId, status });
      // The freed slot is worth a claim only if there may be work for it: due tasks were left
      // behind, the workflow is capped (a task held back by the cap may run now), or the task is
      // not finished (it parked or was handed back: its next due time must be counted).
      if (this.#backlog || wf.options.concurrency || status === 'lease-lost' || !isFinished(status)) this.#poke();
    });
    this.#running.add(p);
    void p.finally(() => this.#running.delete(p));
  }

  /** Fails a claimed task whose run could not be constructed (fenced by the claim's epoch). */
  async #failUnstartable(claimed: ClaimedTask, error: Error): Promise<void> {
    this.#events.emit('worker:error', { error, during: `starting task ${claimed.task.id}` });
    try {
      const { write } = planTransition({
        taskId: claimed.task.id,
        state: claimed.task,
        event: 'fail',
        guard: { epoch: claimed.task.epoch },
        at: this.#host.clock.now(),
        set: { error: encodeError(error) },
        detail: { error: error.message },
        workerId: this.id,
        notify: (edge) => wakeFor(edge, claimed.task.id, claimed.task.workflow),
      });
      await (this.#writer as WriteBatcher).write(write);
    } catch (e) {
      this.#events.emit('worker:error', { error: coerceError(e), during: `failing task ${claimed.task.id}` });
    }
  }

  /**
   * Until when a task's lease is surely still ours: its last renewal plus the lease, less two
   * heartbeats of margin (clocks of workers drift, and another worker needs a poll to notice).
   */
  #safeUntil(taskId: string): number {
    return (this.#renewedAt.get(taskId) ?? 0) + this.#leaseMs - 2 * this.#heartbeatMs;
  }

  /** Renews the leases of every running task; learns of cancels and pauses from other processes. */
  async #beat(): Promise<void> {
    // Self-fencing, whatever the state of the heartbeat itself (it may hang on a dead network):
    // a run whose lease may have expired stops before another worker's run collides with it.
    const now = this.#host.clock.now();
    for (const run of this.#runs.values()) if (now >= this.#safeUntil(run.taskId)) run.loseLease();
    if (this.#beating || !this.#store) return;
    const store = this.#store;
    this.#beating = (async () => {
      const now = this.#host.clock.now();
      const runs = [...this.#runs.values()];
      try {
        if (runs.length) {
          const held = await store.heartbeat({ workerId: this.id, now, leaseMs: this.#leaseMs, held: runs.map((r) => ({ taskId: r.taskId, epoch: r.epoch })) });
          const byId = new Map(held.map((h) => [h.taskId, h]));
          for (const run of runs) {
            if (this.#runs.get(run.taskId) !== run) continue; // finished meanwhile
            const h = byId.get(run.taskId);
            if (!h) {
              run.loseLease();
              continue;
            }
            this.#renewedAt.set(run.taskId, now);
            if (h.status === 'cancelling') run.cancel(h.cancelReason ?? undefined);
            else if (h.pauseRequested) run.requestPause();
            else run.withdrawPause();
          }
        }
      } catch (e) {
        this.#events.emit('worker:error', { error: coerceError(e), during: 'heartbeat' });
      }
    })();
    await this.#beating;
    this.#beating = null;
    // Apart from the renewals, so that it never delays them.
    if (this.#state === 'stopped') return;
    this.#abandoning ??= this.#abandonCancelling(store, this.#host.clock.now())
      .catch((e: unknown) => this.#events.emit('worker:error', { error: coerceError(e), during: 'ending abandoned cancelling tasks' }))
      .finally(() => (this.#abandoning = null));
  }

  /**
   * The fallback for a cancelling task whose worker died and that no worker serving its workflow
   * and version takes over (none runs, as during a rolling deploy to an incompatible version, or
   * all are full): once its lease has been expired for a further `leaseMs` — time for such a
   * worker to reclaim it (a reclaim renews the lease, so the two cannot both happen) — it ends
   * `cancelled` (`abort`), and the entry says that its cleanup did not run and why. Any worker's
   * heartbeat does it, whatever workflows it serves.
   */
  async #abandonCancelling(store: Store, now: number): Promise<void> {
    const abort = transition({ status: 'cancelling' }, 'abort');
    await store.expireLeases({
      now, event: 'abort', from: sourcesOf('abort'), to: abort.to, set: effectColumns(abort, now), expiredForMs: this.#leaseMs,
      note: `its cleanup (onCancel handlers, compensations) did not run: no worker of workflow "{workflow}" version {version} took the task over within ${this.#leaseMs} ms of its lease expiring`,
    });
  }

  /**
   * Stops gracefully: no new claims; runs stop at their next step boundary; in-flight steps get
   * `graceMs` to finish, then their signals fire and each run gets `cancelGraceMs` to settle;
   * unfinished tasks are released to other workers. Returns within `graceMs + cancelGraceMs`
   * (plus the time to write the releases), whatever the steps do with their signals.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.#state === 'created') {
      this.#state = 'stopped';
      return;
    }
    if (this.#state !== 'running') return this.#stopped();
    this.#state = 'stopping';
    this.#events.emit('worker:stopping', { workerId: this.id, inFlight: this.#runs.size });
    this.#poke();
    for (const run of this.#runs.values()) run.drain();
    const graceMs = options.graceMs ?? this.#shutdownGraceMs;
    const all = (): Promise<unknown> => Promise.allSettled([...this.#running]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all(), new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    for (const run of this.#runs.values()) run.abortForShutdown();
    await all();
    await this.#loop;
    // A claim that was in flight when stop() began may have started runs since: drain them too.
    while (this.#running.size) {
      for (const run of this.#runs.values()) {
        run.drain();
        run.abortForShutdown();
      }
      await all();
    }
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    await this.#dwell?.stop();
    await this.#approvalCloser?.stop();
    await this.#purger?.stop();
    await this.#retentionSweeper?.stop();
    await this.#beating;
    await this.#abandoning;
    await this.#writer?.drain();
    for (const off of this.#unsubscribe) await off();
    this.#state = 'stopped';
    this.#events.emit('worker:stopped', { workerId: this.id });
    this.#host.onStopped(this);
  }

  /**
   * @internal For the crash simulation of `stepwise-engine/testing` (`checkResume`) only. The
   * process this worker runs in is taken to have died at this instant: unlike `stop()`, nothing is
   * released, written or waited for, and its leases are left behind for another worker to reclaim.
   * Its timers (heartbeat, poll, scanners, sweepers) are cleared and its runs abandoned (see
   * `TaskRun.abandon`: no step starts, no result reaches the code), so that the test process keeps
   * no live timer and no code of the dead worker runs on. This cannot be done from outside: `stop()`
   * writes and waits, which a dead process does not. The caller makes the worker's store stop
   * answering at the same instant (calls in flight never settle), as the checker's store does.
   */
  abandon(): void {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = null;
    this.#wake?.(); // the claim loop sees the state and ends (unless it waits on the store: then for ever)
    // Their timers are cleared at once; what they wait for on the store never comes.
    for (const part of [this.#dwell, this.#approvalCloser, this.#purger, this.#retentionSweeper]) part?.stop().catch(() => undefined);
    for (const run of this.#runs.values()) run.abandon();
    for (const off of this.#unsubscribe.splice(0)) Promise.resolve(off()).catch(() => undefined);
  }

  async #stopped(): Promise<void> {
    while (this.#state !== 'stopped') await new Promise((r) => setTimeout(r, 10));
  }
}
