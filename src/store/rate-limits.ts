/**
 * @module store/rate-limits
 * Rate limits: the sliding log of draws on the engine's named limits. The store places a draw in
 * the log (checked and appended in one write transaction, serialized per limit and key); which
 * limit a step draws on, and what a draw placed in the future means for its task, is decided
 * above it. The placing rule, the same on every store, is `store-sql/rate-window.ts`.
 */

/** A draw to place: the limit (its numbers), its key, what the draw takes, and the caller's clock. */
export interface RateDrawRequest {
  /** The limit's name (`rateLimits` key) and the key it is shared by ('' for none). */
  name: string;
  key: string;
  /** What the limit allows per window: requests, tokens (null: not counted). */
  requests: number | null;
  tokens: number | null;
  /** The window's length (ms): no interval this long holds more than the limit. */
  perMs: number;
  /** What this draw takes (each at most the limit, checked by the caller). */
  takeRequests: number;
  takeTokens: number;
  /** The caller's clock (ms). */
  now: number;
}

/** A draw placed in the log: its id (to settle its tokens) and when its call may be made (≥ `now`). */
export interface RateDraw {
  id: number;
  at: number;
}

export interface RateLimitStore {
  /**
   * Places a draw at the earliest time, not before `now` nor before the last draw of its limit
   * and key, at which the window ending there has room for it, and appends it to the log; prunes
   * the draws of that limit and key older than one window.
   */
  drawRate(r: RateDrawRequest): Promise<RateDraw>;
  /** Sets a draw's tokens to what its call really used (no-op if it was pruned). */
  settleRate(id: number, tokens: number): Promise<void>;
}
