/**
 * @module sqlite/commit-watch
 * Internal: not part of the public API.
 * Wake-ups across processes on SQLite, its counterpart of PostgreSQL's LISTEN/NOTIFY. SQLite's
 * `PRAGMA data_version` changes exactly when another connection has committed to the file; the
 * watch reads it every {@link WATCH_MS} (a read of the shared lock page, no I/O in WAL mode, a few
 * microseconds) and, when it moved, tells its subscribers that anything may have changed (`'*'`):
 * a worker looks for due tasks, a follower of a task's log or stream reads again, a `result()`
 * looks again. The writer pays nothing: nothing is written for a watcher.
 */
import type Database from 'better-sqlite3';
import type { WakeEvent, WakeTopic } from '../store.ts';

/** How often the watch looks whether another connection committed. */
export const WATCH_MS = 10;

type Listener = { deliver: (event: WakeEvent) => void; topic: WakeTopic };

export class CommitWatch {
  readonly #db: () => Database.Database;
  readonly #listeners = new Set<Listener>();
  #timer: NodeJS.Timeout | null = null;
  #version = -1;

  constructor(db: () => Database.Database) {
    this.#db = db;
  }

  /** Adds a subscriber of `topic`; returns what removes it (the watch stops with its last one). */
  add(deliver: (event: WakeEvent) => void, topic: WakeTopic): () => Promise<void> {
    const listener: Listener = { deliver, topic };
    this.#listeners.add(listener);
    if (!this.#timer) {
      this.#version = this.#read();
      this.#timer = setInterval(() => this.#look(), WATCH_MS);
      this.#timer.unref();
    }
    return async () => {
      this.#listeners.delete(listener);
      if (!this.#listeners.size) this.stop();
    };
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#listeners.clear();
  }

  #read(): number {
    return this.#db().pragma('data_version', { simple: true }) as number;
  }

  #look(): void {
    let version: number;
    try {
      version = this.#read();
    } catch {
      return; // closed, or busy for a moment: the next look reads it again
    }
    if (version === this.#version) return;
    this.#version = version;
    for (const l of [...this.#listeners]) l.deliver(l.topic === 'settled' ? { reason: 'settled', taskId: '*' } : { reason: 'task', taskId: '*' });
  }
}
