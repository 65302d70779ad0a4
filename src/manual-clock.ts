/**
 * @module manual-clock
 * A clock that moves only when told to: `advance('1h')` fires every timer due within the hour, in
 * order, so a test of an hour-long backoff, sleep or timeout takes milliseconds.
 */
import type { Clock } from './clock.ts';
import { toMs, type Duration } from './duration.ts';

interface Timer {
  at: number;
  seq: number;
  resolve: () => void;
}

export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: Timer[] = [];

  constructor(start: number | Date = Date.UTC(2030, 0, 1)) {
    this.#now = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer: Timer = {
        at: this.#now + Math.max(0, ms),
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#timers.push(timer);
    });
  }

  /** Timers waiting to fire. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /** Moves time forward, firing due timers in order and letting their callbacks run. */
  async advance(d: Duration): Promise<void> {
    const target = this.#now + toMs(d);
    for (;;) {
      this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.#timers[0];
      if (!next || next.at > target) break;
      this.#timers.shift();
      this.#now = Math.max(this.#now, next.at);
      next.resolve();
      await new Promise((r) => setImmediate(r));
    }
    this.#now = target;
    await new Promise((r) => setImmediate(r));
  }

  /** Jumps to an absolute time (never backwards). */
  async set(time: number | Date): Promise<void> {
    const t = typeof time === 'number' ? time : time.getTime();
    if (t > this.#now) await this.advance(t - this.#now);
  }
}
