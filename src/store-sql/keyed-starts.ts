/**
 * @module store-sql/keyed-starts
 * Internal: not part of the public API.
 * The conditions of keyed starts, written once for both stores and in the words of the partial
 * unique indexes of migration 17 (so that the planner uses them): a debounced task still
 * unclaimed, a singleton task still live.
 */

/** A debounced task no worker has claimed yet (a claim bumps `runs`): its input may still be replaced. */
export const UNCLAIMED_DEBOUNCE_SQL = "debounce_key IS NOT NULL AND runs = 0 AND status IN ('pending', 'paused')";

/** A singleton task that has not ended: it holds its key. */
export const LIVE_SINGLETON_SQL = "singleton_key IS NOT NULL AND status IN ('pending', 'running', 'waiting', 'paused', 'cancelling')";

/** The due time of a debounced task moved by a later start: `runAt`, but no later than `maxWaitMs` after its creation. */
export function debouncedRunAt(runAt: number, createdAt: number, maxWaitMs: number | null): number {
  return maxWaitMs === null ? runAt : Math.min(runAt, createdAt + maxWaitMs);
}
