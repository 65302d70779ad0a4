/**
 * @module postgres/hot-connection
 * Internal: not part of the public API (the package exports only its index modules).
 * One pooled connection kept checked out for the hottest statement: the lone checkpoint of a run
 * that has no other write to share a round trip with. Through the pool, each statement pays a
 * checkout, a release and an idle timer (about 12 µs on this project's bench machine, 5% of a
 * durable commit); on a kept connection it pays none of them.
 *
 * The connection is the pool's own (it counts against `poolSize`) and goes back to it whenever
 * something else waits for a connection, when it has not been used for a second, when it breaks,
 * and when the store closes. It is only used while no statement of its own is in flight: a second
 * caller takes the pool instead of queueing behind the first.
 */
import type { Pool, PoolClient } from 'pg';

/** A kept connection unused for this long goes back to the pool. */
const IDLE_MS = 1000;

export class HotConnection {
  readonly #pool: Pool;
  readonly #isBroken: (e: unknown) => boolean;
  readonly #max: number;
  #client: PoolClient | null = null;
  #onError: ((e: Error) => void) | null = null;
  #acquiring = false;
  #busy = false;
  #closed = false;
  /** Used since the idle timer last looked. */
  #used = false;
  #idleTimer: NodeJS.Timeout | null = null;

  /**
   * `max`: the pool's size (a pool of one is never held); `isBroken`: whether an error means the
   * connection is unusable (it is then destroyed).
   */
  constructor(pool: Pool, max: number, isBroken: (e: unknown) => boolean) {
    this.#pool = pool;
    this.#max = max;
    this.#isBroken = isBroken;
  }

  /**
   * Runs `fn` on the kept connection if it is free now; otherwise returns `undefined` (the caller
   * uses the pool) and, if there is no kept connection yet, checks one out for the next call.
   */
  tryRun<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> | undefined {
    const client = this.#client;
    if (this.#pool.waitingCount > 0) {
      // Others wait for a connection: give this one back rather than hold it.
      if (client && !this.#busy) this.#giveBack(client);
      return undefined;
    }
    if (!client) {
      this.#acquire();
      return undefined;
    }
    if (this.#busy) return undefined;
    this.#busy = true;
    this.#used = true;
    return this.#runOn(client, fn);
  }

  async #runOn<T>(client: PoolClient, fn: (client: PoolClient) => Promise<T>): Promise<T> {
    try {
      return await fn(client);
    } catch (e) {
      if (this.#isBroken(e)) this.#giveBack(client, e as Error);
      throw e;
    } finally {
      this.#busy = false;
      // Closing, or others waiting for a connection: give it back now, not at the next checkpoint.
      if (this.#closed || this.#pool.waitingCount > 0) this.#giveBack(client);
    }
  }

  /** Every IDLE_MS while a connection is kept: gives it back if it was not used meanwhile. */
  #watchIdle(): void {
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = null;
      const client = this.#client;
      if (!client) return;
      if (!this.#used && !this.#busy) return this.#giveBack(client);
      this.#used = false;
      this.#watchIdle();
    }, IDLE_MS);
    this.#idleTimer.unref();
  }

  #acquire(): void {
    if (this.#acquiring || this.#closed || this.#max < 2) return;
    // Never wait for a connection: only one that is idle, or room to open one.
    if (this.#pool.idleCount === 0 && this.#pool.totalCount >= this.#max) return;
    this.#acquiring = true;
    this.#pool.connect().then(
      (client) => {
        this.#acquiring = false;
        if (this.#closed || this.#client) return client.release();
        // Checked out, the pool no longer listens for its errors: an idle kept connection that
        // drops would otherwise crash the process with an unhandled 'error' event.
        this.#onError = (e: Error) => this.#giveBack(client, e);
        client.on('error', this.#onError);
        this.#client = client;
        this.#used = true;
        if (!this.#idleTimer) this.#watchIdle();
      },
      () => {
        this.#acquiring = false; // the next statement through the pool reports the failure
      },
    );
  }

  /** Returns the connection to the pool (destroyed if `error`); no-op if it is not the kept one. */
  #giveBack(client: PoolClient, error?: Error): void {
    if (this.#client !== client) return;
    this.#client = null;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
    if (this.#onError) client.removeListener('error', this.#onError);
    this.#onError = null;
    client.release(error); // the pool listens for its errors again (and destroys it if `error`)
  }

  /** Gives the connection back (after its statement in flight, if any). */
  close(): void {
    this.#closed = true;
    const client = this.#client;
    if (client && !this.#busy) this.#giveBack(client);
  }
}
