/**
 * @module text-rules
 * Internal: not part of the public API (the package exports only its index modules).
 * One rule for what both stores can hold exactly, checked where values enter (API calls, ctx calls),
 * so that a value one store accepts is never refused by the other at write time:
 * - text stored in its own column (names, keys, reasons, ids) has no NUL character (PostgreSQL's
 *   text type refuses it) and no lone UTF-16 surrogate (neither store can encode it in UTF-8: it
 *   would come back altered, and a step name that changes breaks replay);
 * - times are whole milliseconds that a JavaScript Date can show and a BIGINT holds.
 * JSON payloads need no rule: JSON.stringify escapes both characters.
 */
import { InvalidArgumentError } from './errors.ts';

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The latest time a JavaScript Date can show (±100,000,000 days around 1970). */
export const MAX_TIME_MS = 8.64e15;
/** The longest duration accepted anywhere (sleeps, delays, timeouts): 100 years. */
export const MAX_DURATION_MS = 100 * 365.25 * 86_400_000;

/** Why `text` cannot be stored exactly, or `null` if it can. */
export function textProblem(text: string): string | null {
  if (text.includes('\u0000')) return 'contains a NUL character (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'contains a lone UTF-16 surrogate (half of an emoji or other character, as from cutting a string in the middle of one)';
  return null;
}

/** Throws InvalidArgumentError naming `what` if `text` cannot be stored exactly. */
export function checkText(text: string, what: string): string {
  const problem = textProblem(text);
  if (problem) throw new InvalidArgumentError(`${what} ${problem}: it cannot be stored exactly. Remove it (or keep the text in a JSON payload instead).`);
  return text;
}

/** The longest idempotency key accepted (after the version prefix of a step's business key). */
export const KEY_MAX = 255;

/** Checks a key given by a caller: a non-empty string of at most {@link KEY_MAX} whole characters that can be stored exactly. */
export function checkKey(key: unknown, what: string): string {
  if (typeof key !== 'string' || !key || key.length > KEY_MAX) {
    throw new InvalidArgumentError(
      `${what} must be a non-empty string of at most ${KEY_MAX} characters, got ${typeof key === 'string' ? `${key.length} characters` : typeof key}. Digest long or sensitive parts with hashKey().`,
    );
  }
  checkText(key, what);
  return key;
}
