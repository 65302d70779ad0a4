/**
 * @module ids
 * Task ids are 26-character, time-ordered, Crockford base32 strings (48 bits of milliseconds, then
 * 80 random bits), so ordering by id is ordering by creation time. Within one process ids are
 * strictly increasing even within a millisecond (the random part is incremented), as in ULID.
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
let lastTime = -1;
let lastRandom: number[] = [];

export function newId(now: number = Date.now()): string {
  let random: number[];
  if (now <= lastTime) {
    now = lastTime;
    random = increment(lastRandom);
  } else {
    const bytes = randomBytes(16);
    random = Array.from(bytes, (b) => b % 32);
    random[0] = (random[0] as number) % 16; // leave room to increment within the millisecond
  }
  lastTime = now;
  lastRandom = random;
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time + random.map((d) => ALPHABET[d]).join('');
}

function increment(digits: number[]): number[] {
  const out = [...digits];
  for (let i = out.length - 1; i >= 0; i--) {
    if ((out[i] as number) < 31) {
      out[i] = (out[i] as number) + 1;
      return out;
    }
    out[i] = 0;
  }
  return out;
}

/** A short random id for workers and other process-scoped things. */
export function shortId(): string {
  return randomBytes(5).toString('hex');
}
