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

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      // setTimeout fires at once past 2^31-1 ms (~24.8 days): a longer sleep is a chain of them.
      const until = Date.now() + Math.max(0, ms);
      let timer: NodeJS.Timeout;
      const arm = (): void => {
        const left = until - Date.now();
        timer = setTimeout(left > MAX_TIMER_MS ? arm : done, Math.max(0, Math.min(left, MAX_TIMER_MS)));
      };
      const done = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      arm();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
