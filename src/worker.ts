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
import { ClosedError, InvalidArgumentError, coerceError } from './errors.ts';
import type { WorkerEvents } from './events.ts';
import { shortId } from './ids.ts';
import { isFinished, isTaskStatus } from './lifecycle.ts';
import { TaskRun, type RunDeps } from './run/task-run.ts';
import { ParkedRuns } from './worker/parked-runs.ts';
import { DueAgain } from './worker/due-again.ts';
import { failUnstartable, releaseUnread, runDeps, withJournal, type RunDepsSource } from './worker/run-deps.ts';
import type { TaskStatus } from './lifecycle.ts';
import type { ClaimedTask, Store } from './store.ts';
import { WriteBatcher } from './write-batcher.ts';
import type { Workflow } from './workflow.ts';
import type { RunInfo } from './news.ts';
import { checkText } from './text-rules.ts';
import { workerBackground, type Background } from './worker/background.ts';
import { recordPresence } from './worker/presence.ts';
import { claimPlan, idle, nextDueOf } from './worker/claiming.ts';
import { Heartbeat } from './worker/heartbeat.ts';
import { endDeadLocalLeases, localWorkerId } from './worker/local-leases.ts';
import { WorkerNewsDesk } from './worker/news.ts';
import { resolveOptions, type ResolvedOptions, type WorkerOptions } from './worker/options.ts';
import type { WorkerHost } from './worker/host.ts';

export type { WorkerOptions } from './worker/options.ts';
export { localWorkerId } from './worker/local-leases.ts';

export type WorkerState = 'created' | 'running' | 'stopping' | 'stopped';

export class Worker {
  readonly id: string;
  readonly #host: WorkerHost;
  readonly #o: ResolvedOptions;
  #background: Background | null = null;
  #heartbeat: Heartbeat | null = null;
  readonly #news: WorkerNewsDesk;
  readonly #runs = new Map<string, TaskRun>();
  /** Tasks of `#runs` whose run has only its last write left: they hold no slot. */
  readonly #ending = new Set<string>();
  /** What stop() waits for: each run launched here (by its TaskRun), each start that waits first. */
  readonly #running = new Map<object, Promise<void>>();
  /** Each task's run here, until it has finished. */
  readonly #runDone = new Map<string, Promise<void>>();
  /** Runs that parked here, kept to be resumed without a replay (see `run/resume.ts`). */
  readonly #parked: ParkedRuns;
  /** Tasks its own writes left due at once, looked for again soon (see `worker/due-again.ts`). */
  readonly #dueAgain = new DueAgain();
  /** What every run of this worker is handed (set at start). */
  #deps: RunDepsSource | null = null;
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
  #unsubscribe: Array<() => void | Promise<void>> = [];

  /** @internal Use `engine.worker(options)`. */
  constructor(host: WorkerHost, options: WorkerOptions = {}) {
    this.#host = host;
    this.id = options.workerId ?? localWorkerId(process.pid, shortId());
    if (typeof this.id !== 'string' || !this.id || this.id.length > 200) throw new InvalidArgumentError('worker option workerId must be a string of 1-200 characters.');
    checkText(this.id, 'The workerId');
    this.#o = resolveOptions(options);
    this.#parked = new ParkedRuns(this.#o.keepParked, this.#o.keepParkedMs, host.clock);
    this.#news = new WorkerNewsDesk(host.bus, this.id);
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
    return this.#news.on(name, listener);
  }

  /** Starts claiming and running tasks. Resolves once the worker is running. */
  async start(): Promise<void> {
    if (this.#state !== 'created') throw new ClosedError(`Worker ${this.id} (${this.#state}) cannot start again; it`);
    const store = await this.#host.store();
    this.#store = store;
    const all = this.#host.workflows();
    const names = this.#o.only ?? [...all.keys()];
    for (const name of names) {
      const wf = all.get(name);
      if (!wf) throw new InvalidArgumentError(`Worker asked to serve "${name}", which is not registered with the engine (registered: ${[...all.keys()].join(', ') || 'none'}).`);
      this.#workflows.set(name, wf);
    }
    if (!this.#workflows.size) throw new InvalidArgumentError('This worker has no workflows to run: pass them to new Engine({ workflows }).');
    await store.registerWorkflows([...this.#workflows.values()].map((w) => ({ name: w.name, version: w.version, at: this.#host.clock.now() })));
    await recordPresence(store, this.id, this.#workflows.values());
    this.#writer = new WriteBatcher(store, {
      maxInFlight: store.parallelWrites,
      alone: () => this.#runs.size <= 1,
      onRetry: (error, attempt) => this.#news.emit('worker:error', { error: coerceError(error), during: `writing checkpoints (attempt ${attempt})` }),
      onCommitted: (ops, results) => {
        this.#news.appended(ops);
        this.#news.finished(results);
        this.#dueAgain.note(results, this.#host.clock.now(), (w) => this.#workflows.has(w));
      },
    });
    await endDeadLocalLeases(store, this.#host.clock).catch((e: unknown) =>
      this.#news.emit('worker:error', { error: coerceError(e), during: 'ending the leases of dead workers of this host' }),
    );
    this.#state = 'running';
    this.#subscribe();
    this.#heartbeat = new Heartbeat({
      workerId: this.id,
      store,
      clock: this.#host.clock,
      leaseMs: this.#o.leaseMs,
      heartbeatMs: this.#o.heartbeatMs,
      runs: this.#runs,
      onError: (error, during) => this.#news.emit('worker:error', { error, during }),
    });
    this.#heartbeat.start();
    const heartbeat = this.#heartbeat;
    this.#deps = {
      host: this.#host,
      options: this.#o,
      store,
      writer: this.#writer,
      workerId: this.id,
      news: this.#news,
      safeUntil: (taskId) => heartbeat.safeUntil(taskId),
      keepParked: this.#parked.on,
    };
    this.#loop = this.#claimLoop();
    this.#background = workerBackground(this.#host, this.#o, this.id, store, this.#workflows, (error, during) => this.#news.emit('worker:error', { error, during }));
    this.#news.emit('worker:started', { workerId: this.id, workflows: [...this.#workflows.keys()] });
  }

  #subscribe(): void {
    const bus = this.#host.bus;
    this.#unsubscribe.push(
      bus.on('task:ready', ({ taskId, workflow }) => {
        // A task made runnable, or a signal sent to one: a run of it here may be waiting for it.
        // (`'*'`: anything may have changed, as another process committed on SQLite.)
        if (taskId === '*') for (const run of this.#runs.values()) run.signalArrived();
        else this.#runs.get(taskId)?.signalArrived();
        if (!workflow || this.#workflows.has(workflow)) this.#poke();
      }),
      bus.on('task:cancel', ({ taskId, reason }) => this.#runs.get(taskId)?.cancel(reason ?? undefined)),
      bus.on('task:pause', ({ taskId }) => this.#runs.get(taskId)?.requestPause()),
      bus.on('task:resume', ({ taskId }) => this.#runs.get(taskId)?.withdrawPause()),
    );
  }

  /** Wakes the claim loop now. */
  #poke(): void {
    this.#woken = true;
    this.#wake?.();
  }
  async #claimLoop(): Promise<void> {
    const store = this.#store as Store;
    const plan = claimPlan(this.#workflows);
    while (this.#state === 'running') {
      this.#woken = false;
      this.#parked.sweep();
      // A run whose last write is all that is left holds no slot (see `ending`).
      const free = this.#o.concurrency - this.#runs.size + this.#ending.size;
      const now = this.#host.clock.now();
      let got = 0;
      if (free > 0) {
        try {
          const limit = Math.min(free, this.#o.claimBatch);
          const claimed = await store.claim({ ...plan, workerId: this.id, now, leaseMs: this.#o.leaseMs, limit, ...(this.#parked.size ? { journals: this.#parked.epochs } : {}) });
          got = claimed.length;
          this.#dueAgain.taken(claimed.map((c) => c.task.id));
          if (got) this.#news.appended(claimed.map((c) => c.task));
          this.#backlog = got === Math.min(free, this.#o.claimBatch);
          for (const c of claimed) this.#startRun(c, now);
        } catch (e) {
          this.#backlog = true;
          this.#news.emit('worker:error', { error: coerceError(e), during: 'claiming tasks' });
        }
      } else {
        this.#backlog = true; // no room to look: there may be due tasks
      }
      if (this.#state !== 'running') break;
      // A full claim may have left more due tasks behind: look again at once while there is room.
      if (got > 0 && got === Math.min(free, this.#o.claimBatch)) continue;
      if (this.#woken) continue;
      // Room for more: sleep until the next scheduled task falls due (a delayed start, a sleep or
      // a backoff that parked), if that comes before the next poll. Notifications wake it sooner.
      // "Next" counts from the claim's own `now`: a task that fell due while the claim ran is next.
      const nextDue = free > got ? await nextDueOf(store, [...this.#workflows.keys()], now) : null;
      if (this.#woken || this.#state !== 'running') continue;
      if (nextDue !== null && nextDue <= this.#host.clock.now()) continue; // due already: claim it
      await idle(Math.min(this.#o.pollIntervalMs, this.#dueAgain.lookAgainMs() ?? Infinity), nextDue, this.#host.clock, (wake) => (this.#wake = wake));
      this.#wake = null;
    }
  }

  /** Starts the run of a task claimed at `claimedAt` (the claim's `now`: its lease runs from then). */
  #startRun(claimed: ClaimedTask, claimedAt: number): void {
    // Claimed again while its previous run here writes its end (that write made it due at once):
    // the new run starts once the previous one has finished, so that their news stays in order.
    const previous = this.#ending.has(claimed.task.id) ? this.#runDone.get(claimed.task.id) : undefined;
    if (previous) {
      this.#later(
        claimed.task.id,
        previous.then(() => this.#startRun(claimed, claimedAt)),
      );
      return;
    }
    // The engine's current definition (it may have been re-registered since this worker started).
    const wf = this.#host.workflows().get(claimed.task.workflow) ?? (this.#workflows.get(claimed.task.workflow) as Workflow);
    // The task's run parked here and was kept: it goes on where it stopped if nothing came between.
    const kept = this.#parked.take(claimed.task.id);
    const resumed = kept && kept.workflow === wf && kept.resumable(claimed) ? kept : null;
    if (kept && !resumed) kept.discard();
    if (!resumed && claimed.journalOmitted) {
      // The kept run may not go on after all (its task changed meanwhile): a replay needs the journal.
      this.#later(
        claimed.task.id,
        withJournal(this.#store as Store, claimed).then(
          (full) => this.#startRun(full, claimedAt),
          (e: unknown) => this.#handBack(claimed, coerceError(e)),
        ),
      );
      return;
    }
    const info: RunInfo = { taskId: claimed.task.id, workflow: wf.name, epoch: claimed.task.epoch, workerId: this.id, reclaimed: claimed.event === 'reclaim' };
    let run: TaskRun | undefined = resumed ?? undefined;
    const deps = (): RunDeps =>
      runDeps(this.#deps as RunDepsSource, claimed.task.id, wf, info, () => {
        // Its code is over and its last write queued: the slot goes to the next task while that
        // write commits (claimed now if due tasks were left behind), instead of after it.
        if (!run || this.#runs.get(claimed.task.id) !== run) return;
        this.#ending.add(claimed.task.id);
        if (this.#backlog) this.#poke();
      });
    if (!run) {
      try {
        run = new TaskRun(claimed, wf, deps());
      } catch (e) {
        // A run that cannot even start would otherwise hold its lease until it expires, and again.
        this.#news.emit('worker:error', { error: coerceError(e), during: `starting task ${claimed.task.id}` });
        void failUnstartable(claimed, coerceError(e), this.#writer as WriteBatcher, this.#host.clock, this.id).catch((error: unknown) =>
          this.#news.emit('worker:error', { error: coerceError(error), during: `failing task ${claimed.task.id}` }),
        );
        return;
      }
    }
    this.#launch(run, wf, info, claimedAt, () => (resumed ? resumed.resume(claimed, deps()) : (run as TaskRun).execute()));
  }

  /** Runs `run` (its first run, or resumed) in a slot of this worker, and what follows its end. */
  #launch(run: TaskRun, wf: Workflow, info: RunInfo, claimedAt: number, go: () => Promise<TaskStatus | 'lease-lost'>): void {
    const started = this.#host.clock.now();
    // Reclaimed from its own earlier run (lease expired under it): fence that run off, as the heartbeat would.
    this.#runs.get(run.taskId)?.loseLease();
    this.#ending.delete(run.taskId);
    this.#runs.set(run.taskId, run);
    // The lease runs from the claim, not from now: a start that waited (a journal read, the end
    // of the task's previous run here) has less of it left.
    this.#heartbeat?.renewed(run.taskId, claimedAt);
    if (this.#state === 'stopping') run.drain();
    this.#news.emit('run:claimed', { taskId: run.taskId, workflow: wf.name, epoch: info.epoch, reclaimed: info.reclaimed }, info);
    const ended = this.#runEnded.bind(this, run, wf, info, started);
    const p = go().then(ended, ended);
    this.#running.set(run, p);
    this.#runDone.set(run.taskId, p);
  }

  /** After `run` ended with `outcome` (a rejection, which `go` does not make, counts as a lost lease). Synchronous: its promise settles as this returns. */
  #runEnded(run: TaskRun, wf: Workflow, info: RunInfo, started: number, outcome: unknown): void {
    const status: TaskStatus | 'lease-lost' = isTaskStatus(outcome) ? outcome : 'lease-lost';
    if (this.#runDone.get(run.taskId) === this.#running.get(run)) this.#runDone.delete(run.taskId);
    this.#running.delete(run);
    if (this.#runs.get(run.taskId) === run) {
      this.#runs.delete(run.taskId);
      this.#ending.delete(run.taskId);
      this.#heartbeat?.forget(run.taskId);
    }
    if (run.kept && this.#state === 'running') this.#parked.keep(run);
    else run.discard();
    this.#news.emit('run:finished', { taskId: run.taskId, workflow: wf.name, status, durationMs: this.#host.clock.now() - started }, info);
    this.#news.settled(run.taskId, status);
    // The freed slot is worth a claim only if there may be work for it: due tasks were left behind, the workflow is
    // capped (a task held back by the cap may run now), or the task is not finished (its next due time must be counted).
    if (this.#backlog || wf.options.concurrency || status === 'lease-lost' || !isFinished(status)) this.#poke();
  }

  /** A run's start that waits for something first: the worker's stop waits for it too. */
  #later(taskId: string, start: Promise<void>): void {
    const later = start.catch((e: unknown) => this.#news.emit('worker:error', { error: coerceError(e), during: `starting task ${taskId}` }));
    this.#running.set(later, later);
    void later.finally(() => this.#running.delete(later));
  }

  /** A claimed task whose journal could not be read is handed back rather than held until its lease expires. */
  async #handBack(claimed: ClaimedTask, error: Error): Promise<void> {
    this.#news.emit('worker:error', { error, during: `reading the journal of task ${claimed.task.id}` });
    await releaseUnread(claimed, error, this.#writer as WriteBatcher, this.#host.clock, this.id);
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
    this.#news.emit('worker:stopping', { workerId: this.id, inFlight: this.#runs.size });
    this.#poke();
    for (const run of this.#runs.values()) run.drain();
    this.#parked.clear();
    const graceMs = options.graceMs ?? this.#o.shutdownGraceMs;
    const all = (): Promise<unknown> => Promise.allSettled([...this.#running.values()]);
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
    await this.#background?.stop();
    await this.#heartbeat?.stop();
    await this.#writer?.drain();
    // Gone from the store's list of live workers at once, not after PRESENCE_LIVE_MS.
    await this.#store?.removePresence(this.id).catch((e: unknown) => this.#news.emit('worker:error', { error: coerceError(e), during: 'removing this worker’s presence' }));
    for (const off of this.#unsubscribe) await off();
    this.#state = 'stopped';
    this.#news.emit('worker:stopped', { workerId: this.id });
    this.#news.close();
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
    this.#heartbeat?.abandon();
    this.#wake?.(); // the claim loop sees the state and ends (unless it waits on the store: then for ever)
    // Their timers are cleared at once; what they wait for on the store never comes.
    this.#background?.abandon();
    for (const run of this.#runs.values()) run.abandon();
    this.#parked.forget();
    for (const off of this.#unsubscribe.splice(0)) Promise.resolve(off()).catch(() => undefined);
  }

  async #stopped(): Promise<void> {
    while (this.#state !== 'stopped') await new Promise((r) => setTimeout(r, 10));
  }
}
