/**
 * @module server/sessions
 * The dashboard's sign-in sessions. Signing in with a token creates a session: a random id (32
 * bytes, base64url) that the browser keeps in the session cookie instead of the token, so the
 * cookie names no credential and signing out revokes it for good. Sessions live in the memory of
 * the server process (only the SHA-256 of each id is kept): a restart signs everyone out, and
 * behind several server processes a browser must come back to the one it signed in to (sticky
 * sessions). They end after `ttlMs`; at most `max` are kept (a new one past the bound ends the
 * oldest), each a few hundred bytes, so the table stays small whoever signs in how often.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../index.ts';
import type { Identity } from './auth.ts';

interface Session {
  identity: Identity;
  expiresAt: number;
}

/** Session ids are 43 base64url characters. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (id: string): string => createHash('sha256').update(id).digest('base64url');

export class SessionTable {
  readonly #sessions = new Map<string, Session>();
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #max: number;

  constructor(clock: Clock, ttlMs = 12 * 3_600_000, max = 10_000) {
    this.#clock = clock;
    this.#ttlMs = ttlMs;
    this.#max = max;
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** How long a session lasts, in ms (the cookie's max-age says the same). */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /** A new session of `identity`; returns its id (for the cookie). */
  create(identity: Identity): string {
    this.#sweep();
    const id = randomBytes(32).toString('base64url');
    this.#sessions.set(hashOf(id), { identity: { name: identity.name, role: identity.role }, expiresAt: this.#clock.now() + this.#ttlMs });
    while (this.#sessions.size > this.#max) this.#sessions.delete(this.#sessions.keys().next().value as string);
    return id;
  }

  /** The identity of a live session, or null (unknown, revoked or expired). */
  identify(id: string): Identity | null {
    if (!SESSION_ID.test(id)) return null;
    const key = hashOf(id);
    const s = this.#sessions.get(key);
    if (!s) return null;
    if (s.expiresAt <= this.#clock.now()) {
      this.#sessions.delete(key);
      return null;
    }
    return s.identity;
  }

  /** Ends a session (signing out): its id is refused from now on. */
  revoke(id: string): void {
    if (SESSION_ID.test(id)) this.#sessions.delete(hashOf(id));
  }

  /** Drops expired sessions (oldest first: they were created in order, with one ttl). */
  #sweep(): void {
    const now = this.#clock.now();
    for (const [key, s] of this.#sessions) {
      if (s.expiresAt > now) break;
      this.#sessions.delete(key);
    }
  }
}
