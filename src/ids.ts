/**
 * @module ids
 * Task ids are 26-character, time-ordered, Crockford base32 strings (48 bits of milliseconds, then
 * 80 random bits), so ordering by id is ordering by creation time to the millisecond.
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export function newId(now: number = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[(bytes[i] as number) % 32];
  return time + rand;
}

/** A short random id for workers and other process-scoped things. */
export function shortId(): string {
  return randomBytes(5).toString('hex');
}
