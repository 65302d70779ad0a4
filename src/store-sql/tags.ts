/**
 * @module store-sql/tags
 * Internal: not part of the public API.
 * The merge of a tag change both stores apply inside their transaction: the tags after it, and
 * which index rows go and come.
 */
import type { TagChange } from '../store.ts';

export interface TagMerge {
  tags: Record<string, string>;
  /** Index rows to delete: keys removed or given a new value, with their old value. */
  drop: Array<[string, string]>;
  /** Index rows to insert. */
  add: Array<[string, string]>;
}

/** `current` (the row's `tags` text, or null) after `change`, or 'too-many'. */
export function mergeTags(current: string | null, change: TagChange): TagMerge | 'too-many' {
  const before = current ? (JSON.parse(current) as Record<string, string>) : {};
  const tags: Record<string, string> = { ...before };
  for (const key of change.remove) delete tags[key];
  Object.assign(tags, change.set);
  if (Object.keys(tags).length > change.max) return 'too-many';
  const drop: Array<[string, string]> = [];
  const add: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(before)) if (tags[key] !== value) drop.push([key, value]);
  for (const [key, value] of Object.entries(tags)) if (before[key] !== value) add.push([key, value]);
  return { tags, drop, add };
}

/** The row's `tags` text for `tags` (NULL when there are none). */
export const tagsColumn = (tags: Readonly<Record<string, string>>): string | null => (Object.keys(tags).length ? JSON.stringify(tags) : null);
