/**
 * @module worker/news
 * Internal: not part of the public API (the package exports only its index modules).
 * One worker's side of the engine's news bus: it publishes the worker's news (with the run each
 * came from, so that observers need no bookkeeping of their own), the log entries and finished
 * rows its writes committed, and gives `worker.on(name, fn)` the payloads of this worker's news.
 */
import type { Emit, WorkerEventName, WorkerEvents } from '../events.ts';
import { isFinished } from '../lifecycle.ts';
import type { NewsBus, RunInfo, WorkerNews } from '../news.ts';
import { isTaskEnd, isTaskHead, type WriteResult } from '../store.ts';

export class WorkerNewsDesk {
  readonly #bus: NewsBus;
  readonly #workerId: string;
  /** What `on()` subscribed: dropped when the worker has stopped (it publishes nothing more). */
  readonly #listeners = new Set<() => void>();

  constructor(bus: NewsBus, workerId: string) {
    this.#bus = bus;
    this.#workerId = workerId;
  }

  /** Calls `listener` with the payload of each news `name` of this worker. */
  on<K extends WorkerEventName>(name: K, listener: (payload: WorkerEvents[K]) => void): () => void {
    const off = this.#bus.on(name, (news) => {
      const own = news as WorkerNews;
      if (own.workerId === this.#workerId) listener(own.payload as WorkerEvents[K]);
    });
    this.#listeners.add(off);
    return () => {
      this.#listeners.delete(off);
      off();
    };
  }

  /**
   * Whether anyone listens to news `name` (of any worker of the engine, or an observer). A bound
   * function, as {@link framesAppended} is: every run of the worker is handed the same one.
   */
  readonly hears = (name: WorkerEventName): boolean => this.#bus.hears(name);

  /** Publishes news `name` of this worker; `run`: the run it came from, if any. */
  emit<K extends WorkerEventName>(name: K, payload: WorkerEvents[K], run: RunInfo | null = null): void {
    if (!this.#bus.hears(name)) return;
    this.#bus.publish({ type: name, workerId: this.#workerId, run, payload } as WorkerNews);
  }

  /** How the run `run` reports its news. */
  emitFor(run: RunInfo): Emit {
    return (name, payload) => this.emit(name, payload, run);
  }

  /** Tells this process's log readers that entries of these tasks were committed. */
  appended(written: readonly { taskId?: string; id?: string }[]): void {
    if (!this.#bus.hears('log:appended')) return;
    for (const w of written) this.#bus.publish({ type: 'log:appended', taskId: (w.taskId ?? w.id) as string });
  }

  /** Tells this process's readers of stream frames that frames of the task were committed. */
  readonly framesAppended = (taskId: string): void => {
    if (this.#bus.hears('stream:appended')) this.#bus.publish({ type: 'stream:appended', taskId });
  };

  /**
   * Hands the rows of tasks that committed writes finished to this process's `result()` waiters,
   * as committed: they need not read them back.
   */
  finished(results: readonly WriteResult[]): void {
    if (!this.#bus.hears('task:settled')) return;
    for (const r of results) {
      if (typeof r !== 'object' || r === null || !isFinished(r.status)) continue;
      // A head alone (written when nobody here listened) is news without the outcome: a waiter reads it.
      if (isTaskHead(r) && !isTaskEnd(r)) this.#bus.publish({ type: 'task:settled', taskId: r.id, status: r.status });
      else this.#bus.publish({ type: 'task:settled', taskId: r.id, status: r.status, row: r });
    }
  }

  /**
   * Whether anything in this process listens for finished tasks (`result()` waiters, readers of
   * events, an engine that started tasks here): ends are then written answering their outcomes.
   */
  readonly rowsHeard = (): boolean => this.#bus.hears('task:settled');

  /** A run of this worker ended (`lease-lost`: without writing). */
  settled(taskId: string, status: WorkerEvents['run:finished']['status']): void {
    this.#bus.publish({ type: 'task:settled', taskId, status });
  }

  /** Drops the listeners `on()` subscribed (the worker has stopped: nothing more comes). */
  close(): void {
    for (const off of this.#listeners) off();
    this.#listeners.clear();
  }
}
