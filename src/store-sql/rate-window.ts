/**
 * @module store-sql/rate-window
 * Internal: not part of the public API.
 * Where a rate-limit draw goes in its sliding log, the same on every store. Draws of one limit and
 * key are placed one at a time (the store serializes them) and never before the last one placed,
 * so the log is in `at` order. A new draw is placed at the earliest time `t` ≥ max(now, last `at`)
 * at which the draws in the window (t − per, t] leave room for it. Then any interval of length
 * `per` holds at most the limit: of the draws in it, the one placed last counted all the others.
 */
import type { RateDrawRequest } from '../store/rate-limits.ts';

/** A draw already in the log (of the request's limit and key). */
export interface LoggedDraw {
  at: number;
  requests: number;
  tokens: number;
}

/** What the log holds after `now − per`: how many draws, their sums, the latest `at` (null: none). */
export interface WindowSums {
  requests: number;
  tokens: number;
  lastAt: number | null;
}

function fits(r: RateDrawRequest, requests: number, tokens: number): boolean {
  return (r.requests === null || requests + r.takeRequests <= r.requests) && (r.tokens === null || tokens + r.takeTokens <= r.tokens);
}

/** The draw goes at `now` (the common case, decided from the sums alone), or null: read the log. */
export function placeNow(r: RateDrawRequest, sums: WindowSums): number | null {
  if (sums.lastAt !== null && sums.lastAt > r.now) return null;
  return fits(r, sums.requests, sums.tokens) ? r.now : null;
}

/** Where the draw goes, from the log after `now − per` in `at` order. */
export function placeDraw(r: RateDrawRequest, log: readonly LoggedDraw[]): number {
  const last = log.length ? (log[log.length - 1] as LoggedDraw).at : r.now;
  const base = Math.max(r.now, last);
  let requests = 0;
  let tokens = 0;
  const live = log.filter((d) => d.at > base - r.perMs);
  for (const d of live) {
    requests += d.requests;
    tokens += d.tokens;
  }
  let t = base;
  // Oldest first: each draw leaves the window `per` after its own time.
  for (const d of live) {
    if (fits(r, requests, tokens)) break;
    requests -= d.requests;
    tokens -= d.tokens;
    t = Math.max(base, d.at + r.perMs);
  }
  return t;
}
