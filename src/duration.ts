/**
 * @module duration
 * Durations in the public API are milliseconds or strings such as `'500ms'`, `'30s'`, `'10m'`,
 * `'2h'`, `'1d'`, or combinations (`'1h30m'`).
 */
import { InvalidArgumentError } from './errors.ts';
import { MAX_DURATION_MS } from './text-rules.ts';

export type Duration = number | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** Units from the largest down: a combination names each unit at most once, largest first. */
const UNIT_ORDER = ['d', 'h', 'm', 's', 'ms'];
const PART = /\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)/gy;

/**
 * Milliseconds in `d` (at most 100 years: a time that both stores and JavaScript dates hold);
 * throws {@link InvalidArgumentError} naming `what` on anything else.
 */
export function toMs(d: Duration, what = 'duration'): number {
  return bounded(parseMs(d, what), d, what);
}

function bounded(ms: number, d: Duration, what: string): number {
  if (ms > MAX_DURATION_MS) throw new InvalidArgumentError(`${what} ${JSON.stringify(d)} is longer than 100 years (${MAX_DURATION_MS} ms), the most Stepwise accepts.`);
  return ms;
}

function parseMs(d: Duration, what: string): number {
  if (typeof d === 'number') {
    if (!Number.isFinite(d) || d < 0) throw new InvalidArgumentError(`${what} must be a non-negative number of milliseconds, got ${d}`);
    return d;
  }
  if (typeof d !== 'string') throw new InvalidArgumentError(`${what} must be milliseconds or a string such as '30s', got ${typeof d}`);
  const text = d.trim();
  if (/^\d+$/.test(text)) return Number(text);
  let total = 0;
  let end = 0;
  let lastUnit = -1;
  PART.lastIndex = 0;
  for (let m = PART.exec(text); m; m = PART.exec(text)) {
    const unit = UNIT_ORDER.indexOf(m[2] as string);
    if (unit <= lastUnit) {
      throw new InvalidArgumentError(`${what} "${d}" repeats a unit or puts a smaller one first: write each unit once, largest first, as in '1h30m' or '1h 30m'`);
    }
    lastUnit = unit;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    end = PART.lastIndex;
  }
  if (end === 0 || end !== text.length) {
    throw new InvalidArgumentError(`${what} "${d}" is not a duration: use milliseconds or '500ms', '30s', '10m', '2h', '1d', '1h30m', '1h 30m'`);
  }
  return Math.round(total);
}

/** Like {@link toMs} but `undefined` stays `undefined`. */
export function optionalMs(d: Duration | undefined, what?: string): number | undefined {
  return d === undefined ? undefined : toMs(d, what);
}

/** A short human form: 950ms, 1.2s, 3m 20s, 2h 5m. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)}m ${Math.round((ms % 60_000) / 1000)}s`;
  return `${Math.floor(ms / 3_600_000)}h ${Math.round((ms % 3_600_000) / 60_000)}m`;
}
