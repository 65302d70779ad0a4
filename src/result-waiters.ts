/**
 * @module result-waiters
 * Internal: not part of the public API (the package exports only its index modules).
 * The `result()` calls of one engine waiting for tasks to finish, by task id: news of a finished
 * task (from this process's workers, or a notification from another process, which may name a
 * whole batch of tasks) wakes the waiters of that task only, so that a thousand waiting calls cost
 * one listener, not a thousand checks per finished task. `'*'` (notifications may have been
 * missed) wakes every waiter, to read its task again.
 */
import type { LocalBus } from './local-bus.ts';

export class ResultWaiters {
  readonly #waiting = new Map<string, Set<() => void>>();
  readonly #bus: LocalBus;
  #off: (() => void) | null = null;

  constructor(bus: LocalBus) {
    this.#bus = bus;
  }

  /** How many calls are waiting (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiting.values()) n += set.size;
    return n;
  }

  /**
   * Starts listening for news of `taskId` now, before the caller reads the task: news that
   * arrives between that read and the wait is not lost (the wait then resolves at once). The
   * caller reads the task, then either `stop()`s (it has its answer) or awaits `wait(ms)`, which
   * resolves when news arrives (or has arrived), after `ms`, or when `signal` aborts; either way
   * the watch is over, and the caller reads the task again under a new one.
   */
  watch(taskId: string): { wait: (ms: number, signal?: AbortSignal) => Promise<void>; stop: () => void } {
    this.#off ??= this.#bus.on('task:settled', ({ taskId: id }) => this.#wake(id));
    let news = false;
    let resolveWait: (() => void) | null = null;
    const fired = (): void => {
      news = true;
      resolveWait?.();
    };
    let set = this.#waiting.get(taskId);
    if (!set) this.#waiting.set(taskId, (set = new Set()));
    set.add(fired);
    const stop = (): void => {
      const current = this.#waiting.get(taskId);
      current?.delete(fired);
      if (current && !current.size) this.#waiting.delete(taskId);
      if (!this.#waiting.size && this.#off) {
        this.#off();
        this.#off = null;
      }
    };
    const wait = (ms: number, signal?: AbortSignal): Promise<void> =>
      new Promise<void>((resolve) => {
        if (news || signal?.aborted) {
          stop();
          return resolve();
        }
        const done = (): void => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          stop();
          resolve();
        };
        resolveWait = done;
        const timer = setTimeout(done, ms);
        signal?.addEventListener('abort', done, { once: true });
      });
    return { wait, stop };
  }

  #wake(taskId: string): void {
    const sets = taskId === '*' ? [...this.#waiting.values()] : [this.#waiting.get(taskId)];
    for (const set of sets) for (const done of [...(set ?? [])]) done();
  }
}
