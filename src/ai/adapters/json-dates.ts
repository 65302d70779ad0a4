/**
 * @module ai/adapters/json-dates
 * Internal: not part of the public API.
 * SDK results stored as JSON faithfully. Providers return some fields as `Date`s (the AI SDK's
 * `response.timestamp`), which JSON would turn into strings for good (and a plain step refuses:
 * NOT_SERIALIZABLE). A value is stored as `{ value, dates }`: the value with each Date as its ISO
 * string, and the paths where Dates were, so that the value handed back — on the first run and
 * on every replay alike — has its Dates again where the SDK's types expect them.
 */

/** A stored SDK result. */
export interface Faithful {
  value: unknown;
  /** Paths (keys and indexes) of the Dates in `value`. */
  dates: Array<Array<string | number>>;
}

/** `value` as JSON data plus where its Dates were. Functions and class methods are dropped, as JSON would. */
export function toFaithful(value: unknown): Faithful {
  const dates: Array<Array<string | number>> = [];
  const seen = new Set<object>();
  const walk = (v: unknown, path: Array<string | number>): unknown => {
    if (v instanceof Date) {
      dates.push(path);
      return Number.isNaN(v.getTime()) ? null : v.toISOString();
    }
    if (v === null || typeof v !== 'object') return typeof v === 'function' || typeof v === 'symbol' ? undefined : typeof v === 'bigint' ? String(v) : v;
    if (seen.has(v)) return undefined; // a cycle: JSON cannot hold it
    seen.add(v);
    let out: unknown;
    if (Array.isArray(v)) out = v.map((x, i) => walk(x, [...path, i]) ?? null);
    else if (v instanceof Uint8Array) out = Buffer.from(v).toString('base64');
    else {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const w = walk(x, [...path, k]);
        if (w !== undefined) o[k] = w;
      }
      out = o;
    }
    seen.delete(v);
    return out;
  };
  return { value: walk(value, []), dates };
}

/** The value of a stored result, with its Dates restored. */
export function fromFaithful<T>(stored: Faithful): T {
  let value = stored.value;
  for (const path of stored.dates) {
    if (!path.length) {
      value = typeof value === 'string' ? new Date(value) : value;
      continue;
    }
    let at = value as Record<string | number, unknown> | null;
    for (const key of path.slice(0, -1)) at = at && typeof at === 'object' ? (at[key] as Record<string | number, unknown>) : null;
    const last = path[path.length - 1] as string | number;
    if (at && typeof at === 'object' && typeof at[last] === 'string') at[last] = new Date(at[last] as string);
  }
  return value as T;
}
