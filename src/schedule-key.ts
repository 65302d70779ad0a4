/**
 * @module schedule-key
 * The idempotency key of a schedule's tick: `stepwise:schedule:<id>:<tick ms>` (and
 * `…:manual:<nonce>` for a tick started by hand). One key per tick is what makes a tick start one
 * task however many processes fire it; the task reads its scheduled time back from it
 * (`ctx.scheduledAt`).
 */

const PREFIX = 'stepwise:schedule:';

/** Schedule ids: a letter or digit, then letters, digits, `.`, `_`, `-` (at most 100). */
export const SCHEDULE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export function tickKey(scheduleId: string, at: number, manual?: string): string {
  return `${PREFIX}${scheduleId}:${at}${manual === undefined ? '' : `:manual:${manual}`}`;
}

/** The schedule and tick a task's idempotency key names, or null for a task no schedule started. */
export function tickOfKey(key: string | null): { scheduleId: string; at: number; manual: boolean } | null {
  if (key === null || !key.startsWith(PREFIX)) return null;
  const m = /^([A-Za-z0-9][A-Za-z0-9._-]{0,99}):(\d{1,16})(:manual:.+)?$/.exec(key.slice(PREFIX.length));
  return m ? { scheduleId: m[1] as string, at: Number(m[2]), manual: m[3] !== undefined } : null;
}
