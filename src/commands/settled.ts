/**
 * @module commands/settled
 * The subscription to finished tasks of other processes, opened by the first `result()` or
 * `events()` (a process that never waits for a result, such as a worker, is not sent one message
 * per finished task). Without it (a store with no channel, or a failed subscription) `result()`
 * still finds the outcome by polling.
 */
import type { Store, WakeEvent } from '../store.ts';

export class SettledChannel {
  /** The subscription; null until asked for, and again after a failed attempt, so that the next call tries again. */
  #off: Promise<(() => Promise<void>) | null> | null = null;
  #live = false;
  readonly #deliver: (e: WakeEvent) => void;

  constructor(deliver: (e: WakeEvent) => void) {
    this.#deliver = deliver;
  }

  /** Whether the subscription is open (then `result()` does not wait for it). */
  get live(): boolean {
    return this.#live;
  }

  /** Subscribes once; whether the subscription is live within a second. */
  async listen(store: Store): Promise<boolean> {
    if (!store.subscribe) return false;
    if (this.#live) return true;
    this.#off ??= store
      .subscribe((e) => this.#deliver(e), 'settled')
      .then(
        (off) => {
          // The listener reconnects by itself from now on.
          this.#live = true;
          return off;
        },
        () => {
          this.#off = null;
          return null;
        },
      );
    // Not longer than a second: a database that is slow to take a new connection should not hold
    // up a result that polling can find (the subscription goes on in the background).
    let timer: NodeJS.Timeout | undefined;
    const live = await Promise.race([this.#off.then((off) => off !== null), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 1000)))]);
    clearTimeout(timer);
    return live;
  }

  async close(): Promise<void> {
    await (
      await this.#off
    )?.();
  }
}
