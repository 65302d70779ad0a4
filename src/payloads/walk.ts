/**
 * @module payloads/walk
 * Internal: not part of the public API.
 * Finding and replacing the payload tokens in what a store call returned (plain objects and
 * arrays, a few levels deep), and the tree walk's next level.
 */
import { MARK, TOKEN_PATTERN } from './token.ts';
import { childrenOf } from './tree.ts';

/** Strings of `value` that are not a token `p` made (those need no read). */
export function unknownTo(strings: ReadonlySet<string>, own?: ReadonlyMap<string, string>): Set<string> {
  const out = new Set(strings);
  if (own) for (const t of own.keys()) out.delete(t);
  return out;
}

/**
 * The keys under which a store's result holds payload columns (or log data that embeds them): the
 * only strings looked at for tokens. A title, a tag or a name that happens to spell a token is
 * text, not a reference.
 */
const PAYLOAD_KEYS = new Set(['input', 'output', 'error', 'payload', 'data', 'delta', 'decisions', 'outcome', 'result']);

/**
 * Calls `fn` on each string of `value` in a payload slot: under one of {@link PAYLOAD_KEYS} (in an
 * array there, too), or anywhere when `all` (a list of column texts). Plain objects and arrays
 * only, a few levels deep; `fn`'s answer replaces the string in place.
 */
function visit(value: unknown, all: boolean, fn: (s: string) => string): unknown {
  return walk(value, 0, all, fn);
}

/**
 * One level of {@link visit}. A function of the module, not a closure of each call: V8 drops the
 * optimised code of a closure once every closure of its kind is gone, so a closure made per call
 * is compiled again after each quiet spell of a worker (see docs/architecture.md, "Hot paths").
 */
function walk(v: unknown, depth: number, slot: boolean, fn: (s: string) => string): unknown {
  if (typeof v === 'string') return slot && v.includes(MARK) ? fn(v) : v;
  if (typeof v !== 'object' || v === null || depth > 8) return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const next = walk(v[i], depth + 1, slot, fn);
      if (next !== v[i]) v[i] = next;
    }
    return v;
  }
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v;
  const o = v as Record<string, unknown>;
  for (const k in o) {
    const next = walk(o[k], depth + 1, PAYLOAD_KEYS.has(k), fn);
    if (next !== o[k]) o[k] = next;
  }
  return v;
}

/** Strings of `value` that hold a token, in payload slots (see {@link visit}). */
export function collect(value: unknown, all = false): Set<string> {
  const out = new Set<string>();
  visit(value, all, (s) => {
    out.add(s);
    return s;
  });
  return out;
}

/** `value` with `fn` applied to the strings {@link collect} finds, in place. */
export function replaceAll(value: unknown, fn: (s: string) => string, all = false): unknown {
  return visit(value, all, fn);
}

export function refRoots(strings: Iterable<string>): string[] {
  const roots = new Set<string>();
  for (const s of strings) for (const m of s.matchAll(TOKEN_PATTERN)) if (m[1] === 'r') roots.add(m[2]!);
  return [...roots];
}

/** The children of `frontier`'s nodes still to read: not read yet, and not built before (`built`). */
export function nextFrontier(frontier: readonly string[], contents: ReadonlyMap<string, string>, built: (hash: string) => boolean): string[] {
  const next = new Set<string>();
  for (const h of frontier) {
    const content = contents.get(h);
    if (content === undefined) continue;
    for (const c of childrenOf(content)) if (!contents.has(c) && !built(c)) next.add(c);
  }
  return [...next];
}

/**
 * `data` with the JSON value `text` after `prefix` replaced by `token`, where it is the whole value
 * (followed by `,` or `}`), not the start of a longer one.
 */
export function replaceValue(data: string, prefix: string, text: string, token: string): string {
  const embedded = prefix + text;
  let out = '';
  let from = 0;
  for (let at = data.indexOf(embedded); at !== -1; at = data.indexOf(embedded, at + 1)) {
    const after = data[at + embedded.length];
    if (after !== ',' && after !== '}') continue;
    out += data.slice(from, at) + prefix + token;
    from = at + embedded.length;
  }
  return from === 0 ? data : out + data.slice(from);
}

/** The message of an encoded error, as JSON text (how a log entry embeds it), or null. */
export function messageOf(errorJson: string): string | null {
  try {
    const m = (JSON.parse(errorJson) as { message?: unknown }).message;
    return typeof m === 'string' ? JSON.stringify(m) : null;
  } catch {
    return null;
  }
}
