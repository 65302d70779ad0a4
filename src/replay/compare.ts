/**
 * @module replay/compare
 * Comparing what two runs of a workflow produced, as JSON: the first place where two values differ
 * (a path such as `.items[2].title`), and values shown short enough for an error message. Each run
 * has its own task id, which outputs, error messages and idempotency keys may contain: it is
 * replaced by `<taskId>` before comparing.
 */
import { jsonEqual } from '../json-equal.ts';

/** `value` as plain JSON data (what JSON.stringify keeps), with the task's id replaced by `<taskId>`. */
export function normalized(value: unknown, taskId: string): unknown {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  if (text === undefined) return undefined;
  return JSON.parse(text.split(taskId).join('<taskId>')) as unknown;
}

export function sameJson(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  return jsonEqual(a, b);
}

/** A value for a message: JSON, cut to `max` characters. */
export function show(value: unknown, max = 300): string {
  const text = value === undefined ? 'undefined' : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The first place where two JSON values differ: its path (`''` for the values themselves) and both values there. */
export function firstDifference(a: unknown, b: unknown, path = ''): { path: string; a: unknown; b: unknown } | null {
  if (sameJson(a, b)) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return { path, a, b };
  }
  if (isObject(a) && isObject(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[key], b[key], /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);
      if (d) return d;
    }
  }
  return { path, a, b };
}

/**
 * Where `value` is not plain JSON data (null, a boolean, a finite number, a string, an array or a
 * plain object of those), described for a message (`.sent: a Set`); null if it is. A Set or a Map
 * would compare as `{}`, a class instance by its own fields only: a difference would go unseen.
 */
export function notJson(value: unknown, path = ''): string | null {
  const at = path || 'the value';
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : `${at}: the number ${String(value)}`;
  if (typeof value !== 'object') return `${at}: ${value === undefined ? 'undefined' : `a ${typeof value}`}`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const d = notJson(value[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    const kind = (value as object).constructor?.name;
    return `${at}: ${kind ? `a ${kind}` : 'an object that is not plain'}`;
  }
  for (const [key, v] of Object.entries(value)) {
    const d = notJson(v, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);
    if (d) return d;
  }
  return null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
