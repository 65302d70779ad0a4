/**
 * @module schedules/cron
 * Cron expressions and time zones, through croner: the next tick after a time, and the checks
 * that refuse a bad expression or zone with the place it is wrong.
 */
import { Cron } from 'croner';
import { InvalidArgumentError } from '../errors.ts';

/** A parsed schedule: `next(after)` is its first tick strictly after `after` (ms), or null. */
export interface CronTicks {
  next(after: number): number | null;
}

/** Parses `cron` in `timezone` (IANA name; default UTC). Throws INVALID_ARGUMENT saying what is wrong. */
export function cronTicks(cron: unknown, timezone: unknown, where: string): CronTicks {
  if (typeof cron !== 'string' || !cron.trim()) throw new InvalidArgumentError(`${where}: cron must be a cron expression such as "0 9 * * 1-5" (minute hour day month weekday).`);
  if (timezone !== undefined && timezone !== null && (typeof timezone !== 'string' || !timezone)) {
    throw new InvalidArgumentError(`${where}: timezone must be an IANA time zone name such as "Europe/Berlin".`);
  }
  const zone = (timezone as string | null | undefined) ?? 'UTC';
  let pattern: Cron;
  try {
    pattern = new Cron(cron, { timezone: zone, paused: true, mode: 'auto' });
    pattern.nextRun(new Date(0));
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    const what = /timezone|CronDate/i.test(text) ? `timezone "${zone}" is not an IANA time zone name (such as "Europe/Berlin")` : `cron "${cron}" is not valid: ${text}`;
    throw new InvalidArgumentError(`${where}: ${what}.`, { cause: e });
  }
  return {
    next(after: number): number | null {
      const d = pattern.nextRun(new Date(after));
      return d ? d.getTime() : null;
    },
  };
}
