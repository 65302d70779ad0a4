/**
 * @module store/key-queues
 * Tasks held back behind their concurrency key. A due task of a key that already has `limit` tasks
 * leased or queued ahead of it is stored held, out of the index claims read, so a backlog behind a
 * busy key costs a claim nothing. The store releases held tasks in due order when room opens in
 * their key (inside the write that opens it); this capability is the periodic pass that releases
 * what such a write could not see: a task started held while, in another transaction, its key's
 * last lease ended.
 */

export interface KeyQueueStore {
  /**
   * Releases the held tasks that are now among the first `limit` minus leased of their key's queue
   * (held tasks and tasks due at `now`, in due order); returns how many were released.
   */
  releaseHeld(now: number): Promise<number>;
}
