/**
 * @module server/idempotency
 * The `Idempotency-Key` header of POSTs. Where the engine keeps keys durably (starting a task,
 * sending a signal, deciding an approval) the header is passed to it as the command's key, so a
 * retry gets the first answer even from another server process or after a restart. For the
 * other commands (cancel, retry, pause, resume) the first successful answer is kept here, per
 * caller, route and key, for `ttlMs`: a retried POST gets it again instead of a 409 from the
 * transition that already happened. The same key with a different request is a CONFLICT. Two
 * requests with one key at once share the first one's answer.
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
  readonly #max: number;
  /** How many requests were answered from the cache (for logs and tests). */
  hits = 0;

  constructor(clock: Clock, ttlMs = 24 * 3_600_000, max = 10_000) {
    this.#clock = clock;
    this.#ttlMs = ttlMs;
    this.#max = max;
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
    const found = this.#entries.get(id);
    if (found && now - found.at < this.#ttlMs) {
      if (found.fingerprint !== fingerprint) {
        throw new ConflictError(`Idempotency-Key "${key}" was used for a different request to this route; use a new key for new work.`);
      }
      this.hits++;
      return { ...(await found.answer), replayed: true };
    }
    const answer = run();
    const entry: Entry = { fingerprint, at: now, answer };
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    if (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value as string);
    try {
      const a = await answer;
      if (a.status >= 300 && this.#entries.get(id) === entry) this.#entries.delete(id);
      return { ...a, replayed: false };
    } catch (e) {
      if (this.#entries.get(id) === entry) this.#entries.delete(id);
      throw e;
    }
  }
}
