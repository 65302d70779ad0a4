/**
 * @module api/tags
 * Task tags: string pairs an operator searches by (`list({ tags })`), set at start
 * (`engine.start(wf, input, { tags })`), learnt during the run (`ctx.setTags`) or by an operator
 * (`engine.setTags`). Their checks: each bad tag is an InvalidArgumentError naming it.
 */
import { InvalidArgumentError } from '../errors.ts';
import { checkText } from '../text-rules.ts';

/** Tags of a task: `{ tenant: 'acme', user: 'u1' }`. */
export type Tags = Readonly<Record<string, string>>;

/** At most this many tags per task. */
export const TAGS_MAX = 32;
/** A tag's key: a letter, then letters, digits, `_ . : -`; at most 64 characters. */
export const TAG_KEY = /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/;
/** The longest tag value, in UTF-16 code units. */
export const TAG_VALUE_MAX = 256;

/** Checks a tag map given by a caller (`null` values allowed with `removable`: they remove the key). */
export function checkTags(tags: unknown, where: string, removable = false): Record<string, string | null> {
  if (typeof tags !== 'object' || tags === null || Array.isArray(tags)) {
    throw new InvalidArgumentError(`${where}: tags must be an object of strings, like { tenant: 'acme' }, got ${Array.isArray(tags) ? 'an array' : typeof tags}.`);
  }
  const entries = Object.entries(tags as Record<string, unknown>);
  if (entries.length > TAGS_MAX) throw new InvalidArgumentError(`${where}: at most ${TAGS_MAX} tags per task, got ${entries.length}.`);
  const out: Record<string, string | null> = {};
  for (const [key, value] of entries) {
    checkTagKey(key, where);
    if (value === null && removable) {
      out[key] = null;
      continue;
    }
    if (typeof value !== 'string' || !value || value.length > TAG_VALUE_MAX) {
      const got = typeof value === 'string' ? `${value.length} characters` : value === null ? 'null' : typeof value;
      throw new InvalidArgumentError(`${where}: tag "${key}" must be a non-empty string of at most ${TAG_VALUE_MAX} characters${removable ? ' (or null to remove it)' : ''}, got ${got}.`);
    }
    checkText(value, `${where}: the value of tag "${key}"`);
    out[key] = value;
  }
  return out;
}

/** Checks a tag key (`TAG_KEY`). */
export function checkTagKey(key: unknown, where: string): string {
  if (typeof key !== 'string' || !TAG_KEY.test(key)) {
    throw new InvalidArgumentError(`${where}: "${String(key)}" is not a tag key: a letter, then letters, digits, "_", ".", ":" or "-", at most 64 characters.`);
  }
  return key;
}

/** A tag map of a start (no null values), or undefined for none. */
export function startTags(tags: unknown, where: string): Record<string, string> | undefined {
  if (tags === undefined) return undefined;
  const checked = checkTags(tags, where) as Record<string, string>;
  return Object.keys(checked).length ? checked : undefined;
}
