/**
 * @module commands/engine-state
 * Internal: not part of the public API.
 * What an Engine holds and wires together, apart from its public commands: the store (opened and
 * migrated once, reopened after a failure), the in-process news bus and its observers, the
 * `result()` waiters, the start batcher, the subscription to other processes' finished tasks, the
 * engine's workers, and the context every command module receives. The Engine (engine.ts) is a
 * façade over this and the command modules.
 */
import { systemClock, type Clock } from '../clock.ts';
import { ClosedError, InvalidArgumentError } from '../errors.ts';
import { shortId } from '../ids.ts';
import type { Limits } from '../limits.ts';
import { NewsBus } from '../news.ts';
import { observeNews, type Observer } from '../observers.ts';
import { ResultWaiters } from '../result-waiters.ts';
import { resolveRetention, type RetentionMs } from '../retention/policy.ts';
import type { FireSchedules } from '../schedules/wiring.ts';
import { StartBatcher } from '../start-batcher.ts';
import type { Store, TaskRow, WakeEvent } from '../store.ts';
import { DEFAULT_STORE_URL, type StoreOptions } from '../store-url.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { Worker, WorkerOptions } from '../worker.ts';
import { isWorkflow, type Workflow } from '../workflow.ts';
import type { CommandContext } from './context.ts';
import type { EngineOptions } from './engine-options.ts';
import { deliverNews } from './news.ts';
import { closeEngineStore, openEngineStore, type OpenStore } from './open.ts';
import { engineLimits, engineObservers } from './setup.ts';
import { SettledChannel } from './settled.ts';
import { announceCreated, type StartDeps } from './start.ts';
import { newWorker } from './workers.ts';

export class EngineState {
  readonly clock: Clock;
  readonly workflows = new Map<string, Workflow>();
  readonly bus = new NewsBus();
  /** This engine in the announcements of its starts, which it delivers to its own workers itself. */
  readonly origin = shortId();
  /** The `result()` calls waiting, by task: one listener for all of them. */
  readonly waiters: ResultWaiters;
  readonly workers = new Set<Worker>();
  readonly observers: readonly Observer[];
  readonly limits: Required<Limits>;
  readonly retention: RetentionMs;
  /** What the command modules get from this engine (commands/context.ts). */
  readonly ctx: CommandContext;
  readonly starts: StartDeps;
  /** The subscription to finished tasks of other processes (commands/settled.ts). */
  readonly settled = new SettledChannel((e) => this.deliver(e));
  readonly #store: string | Store;
  readonly #storeOptions: StoreOptions;
  #ready: Promise<Store> | null = null;
  #batcher: StartBatcher | null = null;
  /** The open store and what holds on to it (commands/open.ts), once opened. */
  #opened: OpenStore | null = null;
  #closed = false;

  constructor(options: EngineOptions) {
    this.clock = options.clock ?? systemClock;
    this.waiters = new ResultWaiters(this.bus, this.clock);
    this.#store = options.store ?? DEFAULT_STORE_URL;
    this.#storeOptions = { ...(options.sqlite ? { sqlite: options.sqlite } : {}), ...(options.postgres ? { postgres: options.postgres } : {}) };
    this.limits = engineLimits(options.limits);
    this.retention = options.retention === undefined ? {} : resolveRetention(options.retention, 'new Engine()');
    this.observers = engineObservers(options.observers);
    observeNews(this.bus, this.observers);
    for (const wf of options.workflows ?? []) this.register(wf);
    this.ctx = {
      open: () => this.open(),
      clock: this.clock,
      workflows: this.workflows,
      limits: this.limits,
      observers: this.observers,
      deliver: (e, row) => this.deliver(e, row),
      appended: (taskId) => this.appended(taskId),
    };
    this.starts = { ctx: this.ctx, batcher: (store) => this.startBatcher(store) };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Whether `open()` was called before (and its store is opening or open). */
  get opening(): boolean {
    return this.#ready !== null;
  }

  register(wf: Workflow): void {
    if (!isWorkflow(wf)) throw new InvalidArgumentError('engine.register() takes a value created by workflow(name, fn).');
    this.workflows.set(wf.name, wf);
  }

  /** The open store (opened and migrated once); a failed opening is tried again by the next call. */
  open(): Promise<Store> {
    if (this.#closed) return Promise.reject(new ClosedError('The engine'));
    this.#ready ??= openEngineStore({
      store: this.#store,
      storeOptions: this.#storeOptions,
      origin: this.origin,
      observers: this.observers,
      bus: this.bus,
      deliver: (e) => this.deliver(e),
    }).then(
      (opened) => {
        this.#opened = opened;
        return opened.store;
      },
      (e: unknown) => {
        this.#ready = null;
        throw e;
      },
    );
    return this.#ready;
  }

  /** The start batcher of this process, made with the first start. */
  startBatcher(store: Store): StartBatcher {
    return (this.#batcher ??= new StartBatcher(store, {
      origin: this.origin,
      onCreated: (tasks) =>
        announceCreated(tasks, {
          // Their end will be heard of here if this process listens for ends, or (a store without
          // a channel) if its own workers run them.
          tracksEnds: this.settled.live || (!store.subscribe && this.workers.size > 0),
          waiters: this.waiters,
          deliver: (e) => this.deliver(e),
          appended: (id) => this.appended(id),
        }),
    }));
  }

  /** Subscribes to finished tasks of other processes, once (commands/settled.ts). */
  listenSettled(store: Store): Promise<boolean> {
    return this.#closed ? Promise.resolve(false) : this.settled.listen(store);
  }

  heldHere(taskId: string): boolean {
    for (const w of this.workers) if (w.holds(taskId)) return true;
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
    deliverNews(this.bus, (taskId) => this.heldHere(taskId), e, row);
  }

  newWorker(options: WorkerOptions, idempotency: Idempotency, fireSchedules: FireSchedules): Worker {
    if (this.#closed) throw new ClosedError('The engine');
    return newWorker(
      {
        open: () => this.open(),
        clock: this.clock,
        workflows: this.workflows,
        bus: this.bus,
        observers: this.observers,
        idempotency,
        outputBytes: this.limits.outputBytes,
        retention: this.retention,
        workers: this.workers,
        fireSchedules,
      },
      options,
    );
  }

  /** Stops the workers (gracefully), the subscriptions and the waiters, and closes the store. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.workers].map((w) => w.stop()));
    await this.#ready?.catch(() => null);
    const opened = this.#opened;
    await opened?.unsubscribe?.();
    await this.settled.close();
    this.waiters.forget();
    await closeEngineStore(opened && { ...opened, unsubscribe: null });
  }
}
