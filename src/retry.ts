/**
 * @module retry
 * Step retry policy: bounded attempts, exponential backoff with full jitter (a uniformly random
 * delay between 0 and min(maxDelay, initialDelay × factor^(attempt-1))), a retryable predicate,
 * and an error's own `retryAfterMs` (e.g. from HTTP Retry-After) taking precedence when present.
 * Whether an error is worth retrying at all is the engine's classification (`failure/classify.ts`);
 * `retryIf` can only narrow it (a step's `classify` hook is the way to widen it).
 */
import { InvalidArgumentError, isRetryable } from './errors.ts';
import { toMs, type Duration } from './duration.ts';

export interface RetryOptions {
  /** Attempts in all, the first included. @defaultValue 3 */
  maxAttempts?: number;
  /** Base delay before the second attempt. @defaultValue '1s' */
  initialDelay?: Duration;
  /** Growth per attempt. @defaultValue 2 */
  factor?: number;
  /** Upper bound of one delay. @defaultValue '5m' */
  maxDelay?: Duration;
  /** Full jitter (random delay in [0, computed]); `false` waits exactly the computed delay. @defaultValue true */
  jitter?: boolean;
  /**
   * Narrows which errors get another attempt, among those the engine classifies as retryable
   * (network errors, 408/409/429/5xx, errors that say `retryable: true`, unknown errors). To retry
   * an error the classifier calls permanent, use the step's `classify` hook.
   */
  retryIf?: (error: unknown, attempt: number) => boolean;
}

export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
  readonly factor: number;
  readonly maxDelayMs: number;
  readonly jitter: boolean;
  readonly retryIf: (error: unknown, attempt: number) => boolean;
  /** The user's own `retryIf`, applied after the classification (absent: the class decides). */
  readonly userRetryIf?: (error: unknown, attempt: number) => boolean;
}

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 3,
  initialDelayMs: 1000,
  factor: 2,
  maxDelayMs: 300_000,
  jitter: true,
  retryIf: (error: unknown) => isRetryable(error),
});

export function resolveRetry(opts: RetryOptions | number | undefined, base: RetryPolicy = DEFAULT_RETRY): RetryPolicy {
  if (opts === undefined) return base;
  const o: RetryOptions = typeof opts === 'number' ? { maxAttempts: opts } : opts;
  const maxAttempts = o.maxAttempts ?? base.maxAttempts;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new InvalidArgumentError(`retry.maxAttempts must be an integer ≥ 1, got ${maxAttempts}`);
  if (o.factor !== undefined && (!Number.isFinite(o.factor) || o.factor < 1)) throw new InvalidArgumentError(`retry.factor must be a number ≥ 1, got ${o.factor}`);
  if (o.retryIf !== undefined && typeof o.retryIf !== 'function') throw new InvalidArgumentError('retry.retryIf must be a function');
  const userIf = o.retryIf;
  return {
    maxAttempts,
    initialDelayMs: o.initialDelay === undefined ? base.initialDelayMs : toMs(o.initialDelay, 'retry.initialDelay'),
    factor: o.factor ?? base.factor,
    maxDelayMs: o.maxDelay === undefined ? base.maxDelayMs : toMs(o.maxDelay, 'retry.maxDelay'),
    jitter: o.jitter ?? base.jitter,
    // A user predicate never overrides an explicit NonRetryableError.
    retryIf: userIf ? (err, attempt) => isRetryable(err) && userIf(err, attempt) : base.retryIf,
    ...(userIf ? { userRetryIf: userIf } : base.userRetryIf ? { userRetryIf: base.userRetryIf } : {}),
  };
}

/**
 * Whether attempt number `attempt` (1-based) that failed with `error` gets another attempt. With
 * the error's class (`retryable`), the class decides and the user's `retryIf` may only narrow it.
 */
export function shouldRetry(policy: RetryPolicy, error: unknown, attempt: number, cls?: { retryable: boolean }): boolean {
  if (attempt >= policy.maxAttempts) return false;
  if (!cls) return policy.retryIf(error, attempt);
  return cls.retryable && (policy.userRetryIf ? policy.userRetryIf(error, attempt) : true);
}

/** Delay before the attempt after `attempt`, in ms. `random` is injectable for tests. */
export function backoffMs(policy: RetryPolicy, attempt: number, error?: unknown, random: () => number = Math.random): number {
  const after = (error as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
  // The server's Retry-After wins over our own backoff, even beyond maxDelay: retrying sooner is refused anyway.
  if (typeof after === 'number' && Number.isFinite(after) && after >= 0) return after;
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** Math.max(0, attempt - 1));
  return policy.jitter ? Math.floor(random() * ceiling) : ceiling;
}
