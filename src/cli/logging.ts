/**
 * @module cli/logging
 * The structured log of `stepwise worker` and `stepwise serve` (`--log json|pretty|none`): a pino
 * logger whose lines go where the command prints, and the server package's log observer on it
 * (transitions with their actor, steps, signals, approvals, model calls, deletions). `pretty`
 * turns each JSON line into `12:00:01.234 INFO transition taskId=… event=claim …`.
 */
import pino, { type Logger } from 'pino';
import type { Observer } from '../index.ts';
// The observer's own module, not the server entry: a worker need not load the HTTP stack.
import { createLogObserver } from '../server/observers/logs.ts';
import type { LogFormat } from './context.ts';

/** The fields every line has; `pretty` leaves them out of its `key=value` pairs. */
const OWN_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg']);

/** One pino JSON line as a line for people. */
export function prettyLine(json: string): string {
  const o = JSON.parse(json) as Record<string, unknown>;
  const at = typeof o.time === 'number' ? new Date(o.time).toISOString().slice(11, 23) : '';
  const level = typeof o.level === 'number' ? (pino.levels.labels[o.level]?.toUpperCase() ?? String(o.level)) : '';
  const pairs = Object.entries(o)
    .filter(([k, v]) => !OWN_FIELDS.has(k) && v !== undefined && v !== null)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return [at, level, String(o.msg ?? ''), ...pairs].filter(Boolean).join(' ');
}

/** A logger writing each line through `write` (without its newline), or a silent one for `none`. */
export function createCliLogger(format: LogFormat, write: (line: string) => void): Logger {
  if (format === 'none') return pino({ level: 'silent' });
  return pino(
    { base: { service: 'stepwise' } },
    {
      write: (text: string) => {
        const line = text.replace(/\n$/, '');
        write(format === 'pretty' ? prettyLine(line) : line);
      },
    },
  );
}

/** The log observer of `format` on a logger writing through `write` (none for `none`). */
export function cliLogObserver(format: LogFormat, write: (line: string) => void): Observer | null {
  return format === 'none' ? null : createLogObserver(createCliLogger(format, write));
}
