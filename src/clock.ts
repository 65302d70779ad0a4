/**
 * @module clock
 * Stepwise reads "now" and waits only through a {@link Clock}, so a test can swap in a
 * `ManualClock` (from `stepwise/testing`) and run an hour-long backoff or timeout in milliseconds.
 * "Now" is passed into SQL as a parameter, so SQLite and PostgreSQL agree under test.
 */

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Resolves after `ms`; rejects with `signal.reason` as soon as `signal` aborts. Never holds the
   * process open on its own once the signal has aborted.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, Math.max(0, ms));
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
