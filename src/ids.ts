/**
 * @module ids
 * Task ids are 26-character, time-ordered, Crockford base32 strings (48 bits of milliseconds, then
 * 80 random bits), so ordering by id is ordering by creation time. Within one process ids are
 * strictly increasing even within a millisecond (the random part is incremented), as in ULID,
 * unless the clock steps back by more than a second.
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
let lastTime = -1;
let lastRandom: number[] = [];

/** A clock that moves back by more than this starts a new sequence at its own time (see {@link newId}). */
const MAX_CLOCK_STEP_BACK_MS = 1000;

/**
 * A new id made at `now`. Within a millisecond, and when the clock steps back a little, ids keep
 * increasing (the last one's time, its random part plus one). A clock that steps back by more than
 * a second (another engine's test clock in the same process, a system clock set back) starts
 * again from its own time: an id must tell when its task was made, within a second (retention
 * scans old tasks by id).
 */
export function newId(now: number = Date.now()): string {
  let random: number[];
  if (now <= lastTime && now > lastTime - MAX_CLOCK_STEP_BACK_MS) {
    now = lastTime;
    random = increment(lastRandom);
  } else {
    const bytes = randomBytes(16);
    random = Array.from(bytes, (b) => b % 32);
    random[0] = (random[0] as number) % 16; // leave room to increment within the millisecond
  }
  lastTime = now;
  lastRandom = random;
  let text = timePart(now);
  for (const d of random) text += ALPHABET[d] as string;
  return text;
}

/** The first 10 characters of an id made at `ms`. */
function timePart(ms: number): string {
  let time = '';
  let t = Math.max(0, Math.floor(ms));
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time;
}

/**
 * The smallest id made at `ms`: every id made before `ms` (by its maker's clock) sorts below it.
 * A bound on a scan of old tasks by id, which is their creation order.
 */
export function firstIdAt(ms: number): string {
  return timePart(ms) + '0'.repeat(16);
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
