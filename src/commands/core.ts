/**
 * @module commands/core
 * What an Engine holds and wires once, behind its façade: the store (opened and migrated on first
 * use), the start batcher, the in-process news bus and its delivery to workers and `result()`
 * waiters, the subscription to finished tasks of other processes, idempotency records, schedules,
 * observers and the workers it made. The Engine's public methods delegate to the command modules
 * with what this core gives them.
 */
import { systemClock, type Clock } from '../clock.ts';
import { ClosedError, InvalidArgumentError } from '../errors.ts';
import type { Limits } from '../limits.ts';
import { NewsBus } from '../news.ts';
import { observeNews, type Observer } from '../observers.ts';
import type { Store, TaskRow, WakeEvent } from '../store.ts';
import { DEFAULT_STORE_URL, POSTGRES_OPTIONS, SQLITE_OPTIONS, type StoreOptions } from '../store-url.ts';
import { checkOptionKeys } from '../option-keys.ts';
import { shortId } from '../ids.ts';
import { ResultWaiters } from '../result-waiters.ts';
import { StartBatcher } from '../start-batcher.ts';
import { isWorkflow, type Workflow } from '../workflow.ts';
import { resolveRetention, type RetentionMs } from '../retention/policy.ts';
import { resolveAlerts, type ResolvedAlerts } from '../alerts/options.ts';
import { resolvePayloads, type ResolvedPayloads } from '../payloads/options.ts';
import type { PurgeDeps } from '../retention/purge.ts';
import { resolveStreamFrames, type ResolvedStreamFrames } from '../stream-frames.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { Worker, WorkerOptions } from '../worker.ts';
import { engineSchedules, type FireSchedules, type ScheduleHost } from '../schedules/wiring.ts';
import type { Schedules } from '../schedules/schedules.ts';
import { resolveRateLimits, type RateLimitTable } from '../rate-limits/config.ts';
import type { CommandContext } from './context.ts';
import { ENGINE_OPTIONS, type EngineOptions } from './engine-options.ts';
import { deliverNews } from './news.ts';
import { closeEngineStore, openEngineStore, type OpenStore } from './open.ts';
import { probeStore } from './probe.ts';
import type { ResultDeps } from './result.ts';
import { SettledChannel } from './settled.ts';
import { engineIdempotency, engineLimits, engineObservers } from './setup.ts';
import { announceCreated, type StartDeps } from './start.ts';
import { newWorker } from './workers.ts';

/** The engine's public commands that its schedules use, and the Engine itself (for `engineOf(ctx)` in workflow code). */
export type EngineCommands = Pick<ScheduleHost, 'start' | 'get' | 'cancel'> & { engine: object };

export class EngineCore {
  readonly clock: Clock;
  readonly workflows = new Map<string, Workflow>();
  readonly bus = new NewsBus();
  /** This engine in the announcements of its starts, which it delivers to its own workers itself. */
  readonly #origin = shortId();
  /** The `result()` calls waiting, by task: one listener for all of them. */
  readonly #waiters: ResultWaiters;
  readonly #workers = new Set<Worker>();
  readonly #storeOption: string | Store;
  readonly #storeOptions: StoreOptions;
  #ready: Promise<Store> | null = null;
  #batcher: StartBatcher | null = null;
  #closed = false;
  /** The open store and what holds on to it (commands/open.ts), once opened. */
  #opened: OpenStore | null = null;
  /** The subscription to finished tasks of other processes (commands/settled.ts). */
  readonly #settled = new SettledChannel((e) => this.deliver(e));
  readonly observers: readonly Observer[];
  readonly limits: Required<Limits>;
  readonly idempotency: Idempotency;
  readonly schedules: Schedules;
  readonly rateLimits: RateLimitTable;
  readonly #fireSchedules: FireSchedules;
  readonly #retention: RetentionMs;
  readonly #alerts: ResolvedAlerts | null;
  readonly #streamFrames: ResolvedStreamFrames;
  /** Where large values go and how payloads are encoded (payloads/). */
  readonly payloads: ResolvedPayloads;
  /** What the command modules get from this engine (commands/context.ts). */
  readonly ctx: CommandContext;
  readonly starts: StartDeps;
  readonly results: ResultDeps;

  /** The Engine this is the core of (workers hand it to workflow code). */
  readonly #engine: object;

  constructor(options: EngineOptions, commands: EngineCommands) {
    checkOptionKeys(options, ENGINE_OPTIONS, 'new Engine()');
    checkOptionKeys(options.postgres, POSTGRES_OPTIONS, 'new Engine({ postgres })');
    checkOptionKeys(options.sqlite, SQLITE_OPTIONS, 'new Engine({ sqlite })');
    this.#engine = commands.engine;
    this.clock = options.clock ?? systemClock;
    this.#waiters = new ResultWaiters(this.bus, this.clock);
    this.#storeOption = options.store ?? DEFAULT_STORE_URL;
    this.#storeOptions = { ...(options.sqlite ? { sqlite: options.sqlite } : {}), ...(options.postgres ? { postgres: options.postgres } : {}) };
    this.payloads = resolvePayloads(options.payloads, options.codec);
    this.limits = engineLimits(options.limits, this.payloads.threshold !== false);
    this.rateLimits = resolveRateLimits(options.rateLimits);
    this.#retention = options.retention === undefined ? {} : resolveRetention(options.retention, 'new Engine()');
    this.#alerts = resolveAlerts(options.alerts);
    this.#streamFrames = resolveStreamFrames(options.streamFrames);
    this.observers = engineObservers(options.observers);
    observeNews(this.bus, this.observers);
    for (const wf of options.workflows ?? []) {
      const had = this.workflows.get((wf as Workflow)?.name);
      // One engine serves one version of a workflow: a second one in the list would silently replace the first.
      if (had && had !== wf) {
        throw new InvalidArgumentError(
          `new Engine({ workflows }): workflow "${had.name}" is listed twice (versions ${had.version} and ${(wf as Workflow).version}); an engine serves one version of a workflow. ` +
            `Let the newer one replay older tasks (compatibleVersions: ['${had.version}']), or serve the older version from workers of its own until its tasks end.`,
        );
      }
      this.register(wf);
    }
    this.ctx = {
      open: () => this.open(),
      clock: this.clock,
      workflows: this.workflows,
      limits: this.limits,
      observers: this.observers,
      deliver: (e, row) => this.deliver(e, row),
      appended: (taskId) => this.appended(taskId),
      engine: this.#engine,
    };
    this.starts = { ctx: this.ctx, batcher: (store) => this.#startBatcher(store) };
    this.results = { ctx: this.ctx, waiters: this.#waiters, listenSettled: (store) => this.listenSettled(store), heldHere: (taskId) => this.#heldHere(taskId) };
    this.idempotency = engineIdempotency(options.idempotency, this.ctx, this.payloads.codec !== null);
    ({ schedules: this.schedules, fire: this.#fireSchedules } = engineSchedules({ open: () => this.open(), clock: this.clock, ...commands }));
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  register(wf: Workflow<any, any>): void {
    if (!isWorkflow(wf)) throw new InvalidArgumentError('engine.register() takes a value created by workflow(name, fn).');
    this.workflows.set(wf.name, wf as Workflow);
  }

  /** The open store; once open, each call asks the store again (commands/probe.ts). */
  async ready(): Promise<Store> {
    const opened = this.#ready !== null;
    const store = await this.open();
    if (opened) await probeStore(store);
    return store;
  }

  /** The open store (opened and migrated once), for the engine's own commands: no probe. */
  open(): Promise<Store> {
    if (this.#closed) return Promise.reject(new ClosedError('The engine'));
    this.#ready ??= openEngineStore({
      store: this.#storeOption,
      storeOptions: this.#storeOptions,
      payloads: this.payloads,
      clock: this.clock,
      origin: this.#origin,
      observers: this.observers,
      bus: this.bus,
      deliver: (e) => this.deliver(e),
    }).then(
      (opened) => {
        this.#opened = opened;
        return opened.store;
      },
      (e: unknown) => {
        // Not cached: the next call tries again (the database may be back by then).
        this.#ready = null;
        throw e;
      },
    );
    return this.#ready;
  }

  /** What deleting and purging tasks use: the open store, the clock, the observers. */
  async purgeDeps(): Promise<PurgeDeps> {
    return { store: await this.open(), clock: this.clock, observers: this.observers };
  }

  /** The open store, with this process listening for tasks that finish elsewhere (log readers). */
  async openListening(): Promise<Store> {
    const store = await this.open();
    await this.listenSettled(store);
    return store;
  }

  /** The start batcher of this process, made with the first start. */
  #startBatcher(store: Store): StartBatcher {
    return (this.#batcher ??= new StartBatcher(store, {
      origin: this.#origin,
      onCreated: (tasks) =>
        announceCreated(tasks, {
          // Their end will be heard of here if this process listens for ends, or (a store without
          // a channel) if its own workers run them.
          tracksEnds: this.#settled.live || (!store.subscribe && this.#workers.size > 0),
          waiters: this.#waiters,
          deliver: (e) => this.deliver(e),
          appended: (id) => this.appended(id),
        }),
    }));
  }

  /** Subscribes to finished tasks of other processes, once (commands/settled.ts). */
  listenSettled(store: Store): Promise<boolean> {
    return this.#closed ? Promise.resolve(false) : this.#settled.listen(store);
  }

  /** A worker that runs this engine's workflows; it leaves the engine's set when it stops. */
  worker(options: WorkerOptions): Worker {
    if (this.#closed) throw new ClosedError('The engine');
    const host = { open: () => this.open(), clock: this.clock, workflows: this.workflows, bus: this.bus, observers: this.observers, idempotency: this.idempotency };
    const parts = {
      outputBytes: this.limits.outputBytes,
      retention: this.#retention,
      streamFrames: this.#streamFrames,
      workers: this.#workers,
      fireSchedules: this.#fireSchedules,
      engine: this.#engine,
      rateLimits: this.rateLimits,
      alerts: this.#alerts,
      collectBlobsAfterMs: this.payloads.collectAfterMs,
    };
    return newWorker({ ...host, ...parts }, options);
  }

  /** Stops the workers (gracefully), drops the subscriptions and waiters, and closes the store if this engine opened it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#workers].map((w) => w.stop()));
    await this.#ready?.catch(() => null);
    const opened = this.#opened;
    await opened?.unsubscribe?.();
    await this.#settled.close();
    this.#waiters.forget();
    await closeEngineStore(opened && { ...opened, unsubscribe: null });
  }

  #heldHere(taskId: string): boolean {
    for (const w of this.#workers) if (w.holds(taskId)) return true;
    return false;
  }

  /** Tells this process's log readers that entries of `taskId` were committed. */
  appended(taskId: string): void {
    if (this.bus.hears('log:appended')) this.bus.publish({ type: 'log:appended', taskId });
  }

  /**
   * Passes news about a task to this process's workers and waiters (local or from NOTIFY); `row`:
   * the task as the write this news announces committed it (only for a write of this process).
   */
  deliver(e: WakeEvent, row?: TaskRow): void {
    deliverNews(this.bus, (taskId) => this.#heldHere(taskId), e, row);
  }
}
