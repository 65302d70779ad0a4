/**
 * @module idempotency/keys
 * Building idempotency keys and fingerprints. `hashKey` turns sensitive or long parts of a key (an
 * e-mail address, a card number, a whole request) into a short digest, so that the key stored in
 * the database, in Redis and in the task log reveals nothing; `fingerprintOf` digests a request's
 * parameters, so that a repeat of a key with other parameters is told apart from a true repeat.
 */
import { createHash } from 'node:crypto';
import { InvalidArgumentError } from '../errors.ts';

/** The engine's idempotency key of a step without a business key: `v1:<task>:<name>#<occurrence>`. */
export function engineKey(taskId: string, name: string, occurrence: number): string {
  return `v1:${taskId}:${name}#${occurrence}`;
}

export { KEY_MAX, checkKey } from '../text-rules.ts';

/** JSON with object keys sorted, so that `{a, b}` and `{b, a}` digest the same. */
function canonical(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'bigint' || typeof value === 'function' || typeof value === 'symbol') {
      throw new InvalidArgumentError(`hashKey/fingerprint parts must be JSON data, got a ${typeof value}.`);
    }
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

/**
 * A digest of `parts` for use in an idempotency key: `h:` and 32 hex characters (128 bits of
 * SHA-256). The same parts always give the same key, on every machine and version.
 * @example
 * ctx.step('charge', charge, { key: `charge:${hashKey(input.customerEmail, input.orderId)}` });
 */
export function hashKey(...parts: unknown[]): string {
  if (!parts.length) throw new InvalidArgumentError('hashKey() needs at least one part to digest.');
  return `h:${createHash('sha256').update(canonical(parts)).digest('hex').slice(0, 32)}`;
}

/** The stored fingerprint of a request's parameters (any JSON value), or null without one. */
export function fingerprintOf(value: unknown): string | null {
  if (value === undefined) return null;
  return createHash('sha256').update(canonical(value)).digest('base64url');
}
