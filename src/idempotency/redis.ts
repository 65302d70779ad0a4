/**
 * @module idempotency/redis
 * Idempotency records in Redis, for hot, short-lived keys (a webhook's `Idempotency-Key`, a
 * payment attempt): one string key per record holding its JSON, with a Redis expiry (`PX`) at
 * the record's `expiresAt`, so Redis forgets old records on its own.
 *
 * - A new key is taken with `SET key record NX PX ms`: of concurrent acquirers exactly one gets
 *   `OK`. An existing record is read and decided on with the same rule as the database stores
 *   (`decideAcquire`); a take-over replaces it with a compare-and-set script (the value must still
 *   be byte for byte what was read), so two acquirers of a dead owner's record cannot both win.
 * - Renewing, completing and failing run a Lua script that changes the record only while the
 *   caller is still its owner and it is in progress: an owner that was taken over (its lease ran
 *   out while it was paused) cannot overwrite the new owner's record.
 *
 * `ioredis` is an optional peer dependency, loaded when the first backend is built from a URL.
 * Durability is Redis's own: without AOF `appendfsync always`, a Redis crash can lose the last
 * records — use the database stores where a record must survive that.
 */
import { createRequire } from 'node:module';
import { InvalidArgumentError, StoreUnavailableError } from '../errors.ts';
import { acquireResult, acquiredRecord, decideAcquire, type AcquireRequest, type AcquireResult, type IdempotencyBackend, type IdempotencyRecord } from './records.ts';

/**
 * What this backend needs of a Redis client: an ioredis client (`new Redis(url)`) has it. Declared
 * here so that the package's types do not depend on ioredis being installed.
 */
export interface RedisClientLike {
  set(key: string, value: string, px: 'PX', ms: number, nx: 'NX'): Promise<string | null>;
  get(key: string): Promise<string | null>;
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (e: Error) => void): unknown;
}

export interface RedisIdempotencyOptions {
  /** `redis://host:port/db`; or pass `client`. */
  url?: string;
  /** A connected ioredis client (not closed by `close()`). */
  client?: RedisClientLike;
  /** Prepended to every key. @defaultValue 'stepwise:idempotency:' */
  prefix?: string;
  /**
   * How long a command (and a connection attempt) may take before it fails with
   * STORE_UNAVAILABLE, when connecting from `url`: a Redis that does not answer, or a connection
   * that died without a reset, is not waited on for good. TCP keep-alive is on too.
   * @defaultValue 5000
   */
  timeoutMs?: number;
  /** Passed to ioredis when connecting from `url` (after the options above, so they win). */
  redisOptions?: Record<string, unknown>;
}

const DEFAULT_TIMEOUT_MS = 5000;

/** Replaces the record only if it is still exactly what was read. */
const SWAP = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`;

/**
 * An owner's write: `renew` extends the lease; `completed` / `failed` settle the record. Refused
 * (0) unless the record is in progress and ARGV[1] is its owner. ARGV: owner, mode, now, ms,
 * value, whether there is a value.
 */
const OWNER_WRITE = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = cjson.decode(v)
if r.owner ~= ARGV[1] or r.status ~= 'in_progress' then return 0 end
local now = tonumber(ARGV[3])
local ms = tonumber(ARGV[4])
r.updatedAt = now
if ARGV[2] == 'renew' then
  local t = redis.call('TIME')
  r.leaseExpiresAt = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ms
  if r.expiresAt < now + ms then r.expiresAt = now + ms end
else
  r.status = ARGV[2]
  r.owner = cjson.null
  r.leaseExpiresAt = cjson.null
  r.expiresAt = now + ms
  r.result = cjson.null
  r.error = cjson.null
  if ARGV[6] == '1' then
    if ARGV[2] == 'completed' then r.result = ARGV[5] else r.error = ARGV[5] end
  end
end
local left = r.expiresAt - now
if left < 1 then left = 1 end
redis.call('SET', KEYS[1], cjson.encode(r), 'PX', left)
return 1`;

/** Redis's clock in ms: leases are set and judged by it, not by the callers' clocks. */
const NOW_MS = `local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

type RedisWithScripts = RedisClientLike & {
  stepwiseNowMs(): Promise<number>;
  stepwiseSwap(key: string, expected: string, next: string, ms: number): Promise<number>;
  stepwiseOwnerWrite(key: string, owner: string, mode: string, now: number, ms: number, value: string, has: string): Promise<number>;
};

type RedisClass = new (url: string, options: Record<string, unknown>) => RedisClientLike;

function loadRedis(): RedisClass {
  try {
    const mod = createRequire(import.meta.url)('ioredis') as { default?: unknown; Redis?: unknown };
    return (mod.Redis ?? mod.default ?? mod) as RedisClass;
  } catch (e) {
    throw new StoreUnavailableError('The Redis idempotency backend needs the "ioredis" package, which is not installed: npm install ioredis', { cause: e });
  }
}

/** A Redis error as the engine sees it: Redis unreachable is STORE_UNAVAILABLE (retryable). */
function translate(e: unknown, where: string): unknown {
  if (e instanceof StoreUnavailableError || e instanceof InvalidArgumentError) return e;
  return new StoreUnavailableError(`Redis (${where}) failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

export class RedisIdempotency implements IdempotencyBackend {
  readonly kind = 'redis' as const;
  readonly #client: RedisWithScripts;
  readonly #owned: boolean;
  readonly #prefix: string;
  readonly #where: string;

  constructor(options: RedisIdempotencyOptions) {
    if (!options || (options.url === undefined) === (options.client === undefined)) {
      throw new InvalidArgumentError('RedisIdempotency needs exactly one of `url` (redis://host:port) or `client` (an ioredis client).');
    }
    this.#prefix = options.prefix ?? 'stepwise:idempotency:';
    if (options.client) {
      this.#client = options.client as RedisWithScripts;
      this.#owned = false;
      this.#where = 'client';
    } else {
      const url = options.url as string;
      if (!/^rediss?:\/\//.test(url)) throw new InvalidArgumentError(`Invalid Redis URL "${url}": use redis://host:port[/db] or rediss://…`);
      const Client = loadRedis();
      const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new InvalidArgumentError(`timeoutMs must be a positive whole number of ms, got ${String(timeoutMs)}.`);
      // Fail a command when Redis is away or silent instead of queueing or waiting on it forever.
      this.#client = new Client(url, {
        maxRetriesPerRequest: 2,
        enableOfflineQueue: true,
        commandTimeout: timeoutMs,
        connectTimeout: timeoutMs,
        keepAlive: Math.min(timeoutMs, 10_000),
        ...options.redisOptions,
      }) as RedisWithScripts;
      this.#client.on('error', () => undefined); // reported through the failing commands
      this.#owned = true;
      this.#where = url.replace(/\/\/[^@/]*@/, '//');
    }
    if (typeof this.#client.stepwiseSwap !== 'function') {
      this.#client.defineCommand('stepwiseSwap', { numberOfKeys: 1, lua: SWAP });
      this.#client.defineCommand('stepwiseOwnerWrite', { numberOfKeys: 1, lua: OWNER_WRITE });
      this.#client.defineCommand('stepwiseNowMs', { numberOfKeys: 0, lua: NOW_MS });
    }
  }

  async #do<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw translate(e, this.#where);
    }
  }

  async acquire(req: AcquireRequest): Promise<AcquireResult> {
    const k = this.#prefix + req.key;
    return this.#do(async () => {
      for (;;) {
        // Read before the record, so a lease is judged by a time no later than the read.
        const judged = { ...req, leaseNow: Number(await this.#client.stepwiseNowMs()) };
        const fresh = acquiredRecord(null, 'new', judged);
        const ms = Math.max(1, fresh.expiresAt - req.now);
        if ((await this.#client.set(k, JSON.stringify(fresh), 'PX', ms, 'NX')) === 'OK') return acquireResult(null, 'new');
        const text = await this.#client.get(k);
        if (text === null) continue; // expired meanwhile: take it as new
        const found = JSON.parse(text) as IdempotencyRecord;
        const decision = decideAcquire(found, judged);
        if (decision === 'refuse') return acquireResult(found, decision);
        const next = acquiredRecord(found, decision, judged);
        if ((await this.#client.stepwiseSwap(k, text, JSON.stringify(next), Math.max(1, next.expiresAt - req.now))) === 1) return acquireResult(found, decision);
        // Someone changed it between the read and the swap: decide again on what is there now.
      }
    });
  }

  renew(key: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
    return this.#do(async () => (await this.#client.stepwiseOwnerWrite(this.#prefix + key, owner, 'renew', now, leaseMs, '', '0')) === 1);
  }

  complete(key: string, owner: string, result: string | null, now: number, ttlMs: number): Promise<boolean> {
    return this.#do(async () => (await this.#client.stepwiseOwnerWrite(this.#prefix + key, owner, 'completed', now, ttlMs, result ?? '', result === null ? '0' : '1')) === 1);
  }

  fail(key: string, owner: string, error: string, now: number, ttlMs: number): Promise<boolean> {
    return this.#do(async () => (await this.#client.stepwiseOwnerWrite(this.#prefix + key, owner, 'failed', now, ttlMs, error, '1')) === 1);
  }

  get(key: string): Promise<IdempotencyRecord | null> {
    return this.#do(async () => {
      const text = await this.#client.get(this.#prefix + key);
      return text === null ? null : (JSON.parse(text) as IdempotencyRecord);
    });
  }

  /** Redis forgets expired records by itself (each key carries its expiry). */
  async purge(): Promise<number> {
    return 0;
  }

  /** Closes the connection if this backend opened it. */
  async close(): Promise<void> {
    if (this.#owned) await this.#client.quit().catch(() => this.#client.disconnect());
  }
}
