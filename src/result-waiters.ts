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
   * Resolves when news of `taskId` arrives, after `ms`, or when `signal` aborts, whichever is
   * first; the caller then reads the task again.
   */
  wait(taskId: string, ms: number, signal?: AbortSignal): Promise<void> {
    this.#off ??= this.#bus.on('task:settled', ({ taskId: id }) => this.#wake(id));
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        const set = this.#waiting.get(taskId);
        set?.delete(done);
        if (set && !set.size) this.#waiting.delete(taskId);
        if (!this.#waiting.size && this.#off) {
          this.#off();
          this.#off = null;
        }
        resolve();
      };
      const timer = setTimeout(done, ms);
      let set = this.#waiting.get(taskId);
      if (!set) this.#waiting.set(taskId, (set = new Set()));
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  #wake(taskId: string): void {
    const sets = taskId === '*' ? [...this.#waiting.values()] : [this.#waiting.get(taskId)];
    for (const set of sets) for (const done of [...(set ?? [])]) done();
  }
}
