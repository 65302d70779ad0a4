/**
 * @module server/idempotency
 * The `Idempotency-Key` header of POSTs. Where the engine keeps keys durably (starting a task,
 * sending a signal, deciding an approval) the header is passed to it as the command's key, so a
 * retry gets the first answer even from another server process or after a restart. For the
 * other commands (cancel, retry, pause, resume) the first successful answer is kept here, per
 * caller, route and key, for `ttlMs`: a retried POST gets it again instead of a 409 from the
 * transition that already happened. The same key with a different request is a CONFLICT. Two
 * requests with one key at once share the first one's answer.
 *
 * The cache is bounded in bytes: each kept answer counts the UTF-8 bytes of its JSON body, key and
 * scope (plus a fixed overhead per entry); past `maxBytes` (or `maxEntries`) the oldest answers
 * are dropped, and an answer larger than `maxBytes` alone is not kept (its retry runs again).
 */
import { createHash } from 'node:crypto';
import { ConflictError, InvalidArgumentError, type Clock } from '../index.ts';

export interface StoredAnswer {
  status: number;
  body: unknown;
}

interface Entry {
  fingerprint: string;
  at: number;
  answer: Promise<StoredAnswer>;
  /** Bytes counted for it once its answer is kept (0 while it runs). */
  bytes: number;
}

/** What an entry costs beyond its body, key and scope: the fingerprint, the map slot, the objects. */
const ENTRY_OVERHEAD_BYTES = 256;

export interface IdempotencyCacheLimits {
  /** How long an answer is kept. @defaultValue 24 hours */
  ttlMs?: number;
  /** Total bytes of the kept answers. @defaultValue 16 MiB */
  maxBytes?: number;
  /** Kept answers, at most. @defaultValue 10,000 */
  maxEntries?: number;
}

export const IDEMPOTENCY_HEADER = 'idempotency-key';

/** A header value: 1-255 visible ASCII characters. */
export function checkIdempotencyKey(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) throw new InvalidArgumentError('The Idempotency-Key header must be 1-255 visible ASCII characters.');
  return key;
}

export class IdempotencyCache {
  readonly #entries = new Map<string, Entry>();
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxBytes: number;
  readonly #max: number;
  #bytes = 0;
  /** How many requests were answered from the cache (for logs and tests). */
  hits = 0;

  constructor(clock: Clock, limits: IdempotencyCacheLimits = {}) {
    this.#clock = clock;
    this.#ttlMs = limits.ttlMs ?? 24 * 3_600_000;
    this.#maxBytes = limits.maxBytes ?? 16 * 1024 * 1024;
    this.#max = limits.maxEntries ?? 10_000;
  }

  /** Bytes of the answers kept now. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Answers kept (or running) now. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Runs `run` once per (scope, key): a repeat with the same request gets the first successful
   * answer; a failed first attempt is forgotten so the repeat runs again.
   */
  async once(scope: string, key: string, request: unknown, run: () => Promise<StoredAnswer>): Promise<StoredAnswer & { replayed: boolean }> {
    const id = `${scope}\u0000${key}`;
    const fingerprint = createHash('sha256')
      .update(JSON.stringify(request) ?? '')
      .digest('hex');
    const now = this.#clock.now();
    this.#dropExpired(now);
    const found = this.#entries.get(id);
    if (found && now - found.at < this.#ttlMs) {
      if (found.fingerprint !== fingerprint) {
        throw new ConflictError(`Idempotency-Key "${key}" was used for a different request to this route; use a new key for new work.`);
      }
      this.hits++;
      return { ...(await found.answer), replayed: true };
    }
    const answer = run();
    const entry: Entry = { fingerprint, at: now, answer, bytes: 0 };
    if (found) this.#delete(id, found);
    this.#entries.set(id, entry);
    this.#evict();
    try {
      const a = await answer;
      if (this.#entries.get(id) === entry) {
        if (a.status >= 300) this.#delete(id, entry);
        else this.#account(id, entry, a);
      }
      return { ...a, replayed: false };
    } catch (e) {
      if (this.#entries.get(id) === entry) this.#delete(id, entry);
      throw e;
    }
  }

  /** Counts a kept answer's bytes, then drops the oldest answers past the bounds. */
  #account(id: string, entry: Entry, answer: StoredAnswer): void {
    const body = JSON.stringify(answer.body) ?? '';
    entry.bytes = Buffer.byteLength(body, 'utf8') + Buffer.byteLength(id, 'utf8') + ENTRY_OVERHEAD_BYTES;
    this.#bytes += entry.bytes;
    if (entry.bytes > this.#maxBytes) this.#delete(id, entry);
    this.#evict();
  }

  #delete(id: string, entry: Entry): void {
    this.#entries.delete(id);
    this.#bytes -= entry.bytes;
  }

  /** Oldest first (entries are kept in the order they were made, one ttl each). */
  #evict(): void {
    for (const [id, entry] of this.#entries) {
      if (this.#bytes <= this.#maxBytes && this.#entries.size <= this.#max) return;
      this.#delete(id, entry);
    }
  }

  #dropExpired(now: number): void {
    for (const [id, entry] of this.#entries) {
      if (now - entry.at < this.#ttlMs) return;
      this.#delete(id, entry);
    }
  }
}
