/**
 * @module api/rate-limits
 * The public shapes of rate limits: the engine's named limits (`new Engine({ rateLimits })`),
 * what a step names to draw on one (`ctx.step(name, fn, { rateLimit })`), and what the step's
 * function learns of its draw (`StepContext.rateLimit`). Types only.
 */
import type { Duration } from '../duration.ts';

/**
 * One named limit: at most `requests` calls and `tokens` tokens in any interval of length `per`,
 * shared by every worker of every process on the same store. At least one of `requests` and
 * `tokens` is required. A step that gives a `key` (a tenant, an API key) draws on a window of
 * its own for that key, with the same numbers.
 * @example { requests: 500, tokens: 200_000, per: '1m' }
 */
export interface RateLimitOptions {
  /** Calls allowed per window (a positive integer). @defaultValue not counted */
  requests?: number;
  /** Tokens allowed per window (a positive integer). @defaultValue not counted */
  tokens?: number;
  /** The window's length: no interval this long holds more than the limit (`'1m'`, `'2s'`, ms). */
  per: Duration;
}

/** The engine's named limits, by name. */
export type RateLimits = Readonly<Record<string, RateLimitOptions>>;

/**
 * What a step draws on before each attempt: a limit's name, or the name with a key (its own
 * window per key) and what the attempt takes (`requests` defaults to 1, `tokens` to 0).
 * @example 'openai'
 * @example { name: 'openai', key: tenantId, tokens: 1200 }
 */
export type StepRateLimit = string | { name: string; key?: string; requests?: number; tokens?: number };

/** What a step's function learns of the draw its attempt made (`StepContext.rateLimit`). */
export interface RateLimitTicket {
  /** The limit drawn on. */
  readonly name: string;
  /** The key drawn on ('' when the step gave none). */
  readonly key: string;
  /** When the draw let the call go (ms, the engine's clock): the call's place in the window. */
  readonly drawnAt: number;
  /** The tokens drawn (the step's estimate). */
  readonly tokens: number;
  /**
   * Sets the draw's tokens to what the call really used, so that the window counts real usage
   * (draws placed after it see the new count). Never rejects: if the store cannot be reached,
   * the estimate stays.
   */
  settle(tokens: number): Promise<void>;
}
