/**
 * @module log-watch
 * Internal: not part of the public API (the package exports only its index modules).
 * Followers of tasks in this process, for a store that does not tell it of entries another
 * process commits (PostgreSQL: its notifications carry wake-ups, not each step's entry). While
 * any task is followed, one read every {@link LOG_WATCH_MS} asks where each followed task's log
 * and stream stand (`Store.logPositions`), and the followers of a task that moved are told at
 * once (`log:moved` on the bus) instead of at their next poll: a reply written by a worker in
 * another process reaches a reader within milliseconds. One statement per interval, whatever the
 * number of followers; none while nobody follows.
 */
import type { NewsBus } from './news.ts';
import type { LogPosition, Store } from './store.ts';

/** How often the followed tasks' positions are read. */
export const LOG_WATCH_MS = 15;

class LogWatch {
  readonly #store: Store & { logPositions: NonNullable<Store['logPositions']> };
  readonly #bus: NewsBus;
  /** Followed tasks: how many follow each, and where its log stood at the last read. */
  readonly #followed = new Map<string, { readers: number; at: LogPosition | null }>();
  #timer: NodeJS.Timeout | null = null;
  #reading = false;

  constructor(store: Store & { logPositions: NonNullable<Store['logPositions']> }, bus: NewsBus) {
    this.#store = store;
    this.#bus = bus;
  }

  /** Follows `taskId` until the returned function is called. */
  follow(taskId: string): () => void {
    const f = this.#followed.get(taskId);
    if (f) f.readers++;
    else this.#followed.set(taskId, { readers: 1, at: null });
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.#look(), LOG_WATCH_MS);
      this.#timer.unref();
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const g = this.#followed.get(taskId);
      if (g && --g.readers === 0) this.#followed.delete(taskId);
      if (!this.#followed.size && this.#timer) {
        clearInterval(this.#timer);
        this.#timer = null;
      }
    };
  }

  async #look(): Promise<void> {
    if (this.#reading || !this.#followed.size) return;
    this.#reading = true;
    try {
      const now = await this.#store.logPositions([...this.#followed.keys()]);
      for (const p of now) {
        const f = this.#followed.get(p.taskId);
        if (!f) continue;
        // A task's first look tells its followers too: the watch does not know what they read
        // before it, and an entry committed between a follower's first read and this look would
        // otherwise be taken as the starting point and wait for the follower's next poll.
        const moved = f.at === null || f.at.seq !== p.seq || f.at.frame !== p.frame;
        f.at = p;
        if (moved) this.#bus.publish({ type: 'log:moved', taskId: p.taskId });
      }
    } catch {
      // The store is away for a moment: followers still poll; the next look reads again.
    } finally {
      this.#reading = false;
    }
  }
}

const watches = new WeakMap<Store, LogWatch>();

/**
 * Follows `taskId` for news committed by other processes, if the store needs it (it has
 * `logPositions`); returns what ends the following.
 */
export function followLog(store: Store, bus: NewsBus, taskId: string): () => void {
  if (!store.logPositions) return () => undefined;
  let watch = watches.get(store);
  if (!watch) {
    watch = new LogWatch(store as Store & { logPositions: NonNullable<Store['logPositions']> }, bus);
    watches.set(store, watch);
  }
  return watch.follow(taskId);
}
