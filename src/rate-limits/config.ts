/**
 * @module rate-limits/config
 * Internal: not part of the public API.
 * The engine's named rate limits (`new Engine({ rateLimits })`), validated once when the engine is
 * made, and what a step's `rateLimit` option asks of one, validated at the step's first use. Bad
 * input is an InvalidArgumentError (INVALID_ARGUMENT) that names the option and the limit.
 */
import { toMs } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { RateLimits, StepRateLimit } from '../api/rate-limits.ts';

/** A limit with its window in ms; `null` for a quantity it does not count. */
export interface ResolvedRateLimit {
  readonly name: string;
  readonly requests: number | null;
  readonly tokens: number | null;
  readonly perMs: number;
  /**
   * How late a call may start after its draw's place (5% of the window, at least 1 ms). Draws are
   * placed in a window of `perMs + lateMs`, and a call that would start later than this draws
   * again, so that the calls themselves (not only their draws) never put more than the limit in
   * any interval of `perMs`.
   */
  readonly lateMs: number;
}

/** The share of a window a call may start late by (and the share of throughput it costs). */
export const LATE_SHARE = 0.05;

export type RateLimitTable = ReadonlyMap<string, ResolvedRateLimit>;

/** What one attempt of a step draws: on which limit and key, and how much. */
export interface StepRate {
  readonly limit: ResolvedRateLimit;
  readonly key: string;
  readonly requests: number;
  readonly tokens: number;
}

const WHERE = 'new Engine({ rateLimits })';
const LIMIT_KEYS = ['requests', 'tokens', 'per'];
const STEP_KEYS = ['name', 'key', 'requests', 'tokens'];
const MAX_NAME = 100;
const MAX_KEY = 200;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function count(value: unknown, what: string, min: 0 | 1): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(`${what} must be a ${min ? 'positive' : 'non-negative'} integer, got ${JSON.stringify(value) ?? String(value)}.`);
  }
  return value;
}

function resolveLimit(name: string, o: unknown): ResolvedRateLimit {
  const at = `${WHERE}: rateLimits.${name}`;
  if (!isObject(o)) throw new InvalidArgumentError(`${at} must be an object such as { requests: 500, tokens: 200_000, per: '1m' }.`);
  const unknown = Object.keys(o).filter((k) => !LIMIT_KEYS.includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${at}: unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${LIMIT_KEYS.join(', ')}).`);
  if (o.per === undefined) throw new InvalidArgumentError(`${at}.per is required: the window's length, such as '1m' or '2s'.`);
  const perMs = toMs(o.per as never, `${at}.per`);
  if (perMs < 1) throw new InvalidArgumentError(`${at}.per must be at least 1 ms, got ${JSON.stringify(o.per)}.`);
  const requests = o.requests === undefined ? null : count(o.requests, `${at}.requests`, 1);
  const tokens = o.tokens === undefined ? null : count(o.tokens, `${at}.tokens`, 1);
  if (requests === null && tokens === null) throw new InvalidArgumentError(`${at} counts nothing: give requests, tokens or both.`);
  return { name, requests, tokens, perMs, lateMs: Math.max(1, Math.floor(perMs * LATE_SHARE)) };
}

/** The engine's limits by name; throws INVALID_ARGUMENT naming the bad option. */
export function resolveRateLimits(options: RateLimits | undefined): RateLimitTable {
  const table = new Map<string, ResolvedRateLimit>();
  if (options === undefined) return table;
  if (!isObject(options)) throw new InvalidArgumentError(`${WHERE}: rateLimits must be an object of named limits, such as { openai: { requests: 500, per: '1m' } }.`);
  for (const [name, o] of Object.entries(options)) {
    if (!name || name.length > MAX_NAME) throw new InvalidArgumentError(`${WHERE}: a limit's name must be 1 to ${MAX_NAME} characters, got ${JSON.stringify(name)}.`);
    table.set(name, resolveLimit(name, o));
  }
  return table;
}

function unknownLimit(where: string, name: string, table: RateLimitTable): InvalidArgumentError {
  const known = [...table.keys()];
  const list = known.length ? `known: ${known.join(', ')}` : 'this engine has no rate limits';
  return new InvalidArgumentError(
    `${where}: rateLimit "${name}" is not a limit of this engine (${list}). Declare it with new Engine({ rateLimits: { ${JSON.stringify(name)}: { requests, per } } }).`,
  );
}

/**
 * What a step's `rateLimit` option draws, or the error that fails the run: an unknown limit, a bad
 * key or count, or a draw larger than the limit allows in a window (it could never go).
 */
export function resolveStepRate(table: RateLimitTable, where: string, option: StepRateLimit): StepRate {
  const o = typeof option === 'string' ? { name: option } : option;
  if (!isObject(o) || typeof o.name !== 'string') throw new InvalidArgumentError(`${where}: rateLimit must be a limit's name or { name, key, tokens, requests }.`);
  const unknown = Object.keys(o).filter((k) => !STEP_KEYS.includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${where}: unknown rateLimit option ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${STEP_KEYS.join(', ')}).`);
  const limit = table.get(o.name);
  if (!limit) throw unknownLimit(where, o.name, table);
  if (o.key !== undefined && (typeof o.key !== 'string' || o.key.length > MAX_KEY)) {
    throw new InvalidArgumentError(`${where}: rateLimit.key must be a string of at most ${MAX_KEY} characters, got ${JSON.stringify(o.key)}.`);
  }
  const requests = o.requests === undefined ? 1 : count(o.requests, `${where}: rateLimit.requests`, 0);
  const tokens = o.tokens === undefined ? 0 : count(o.tokens, `${where}: rateLimit.tokens`, 0);
  for (const [what, asked, allowed] of [
    ['requests', requests, limit.requests],
    ['tokens', tokens, limit.tokens],
  ] as const) {
    if (allowed !== null && asked > allowed) {
      throw new InvalidArgumentError(`${where}: rateLimit draws ${asked} ${what}, more than limit "${limit.name}" allows in a window (${allowed}): it could never go.`);
    }
  }
  return { limit, key: o.key ?? '', requests, tokens };
}
