/**
 * @module server/auth
 * Who is asking: bearer tokens mapped to identities and roles. Tokens come from `STEPWISE_TOKENS`
 * (`name:role:token`, comma-separated) or a JSON file (`[{ "name", "role", "token" }]` or
 * `{ "tokens": [...] }`). A presented token is compared with every configured one in constant time
 * (both sides hashed to the same length first, so neither the content nor the length leaks through
 * timing). Tokens are never logged or echoed: errors name the identity or the position only.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from '../index.ts';

/** The roles: a viewer reads; an operator also starts and steers tasks; an approver also decides approvals; an admin does all, and alone deletes tasks. */
export const ROLES = ['viewer', 'operator', 'approver', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** An authenticated caller. `name` becomes the actor (`by`) of every command it sends. */
export interface Identity {
  name: string;
  role: Role;
}

export interface TokenEntry extends Identity {
  token: string;
}

/** The rights a request needs. */
export type Permission = 'read' | 'operate' | 'decide' | 'delete';

const RIGHTS: Record<Role, readonly Permission[]> = {
  viewer: ['read'],
  operator: ['read', 'operate'],
  approver: ['read', 'decide'],
  admin: ['read', 'operate', 'decide', 'delete'],
};

export function can(identity: Identity, permission: Permission): boolean {
  return RIGHTS[identity.role].includes(permission);
}

/** The roles that hold a permission, for a 403 that says what would be allowed. */
export function rolesWith(permission: Permission): Role[] {
  return ROLES.filter((r) => RIGHTS[r].includes(permission));
}

const NAME = /^[A-Za-z0-9._@-]{1,100}$/;

function checkEntry(e: unknown, where: string): TokenEntry {
  if (typeof e !== 'object' || e === null) throw new InvalidArgumentError(`${where}: expected { name, role, token }.`);
  const { name, role, token } = e as Record<string, unknown>;
  if (typeof name !== 'string' || !NAME.test(name)) throw new InvalidArgumentError(`${where}: name must be 1-100 characters of letters, digits, "._@-".`);
  if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) throw new InvalidArgumentError(`${where} (${name}): role must be one of ${ROLES.join(', ')}.`);
  if (typeof token !== 'string' || token.length < 16 || /[\s,]/.test(token)) {
    throw new InvalidArgumentError(`${where} (${name}): the token must be at least 16 characters without spaces or commas.`);
  }
  return { name, role: role as Role, token };
}

/** Parses `name:role:token,name:role:token` (the token may itself contain ":"). */
export function parseTokenList(text: string): TokenEntry[] {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((part, i) => {
      const [name, role, ...rest] = part.split(':');
      return checkEntry({ name, role, token: rest.join(':') }, `STEPWISE_TOKENS entry ${i + 1}`);
    });
  return unique(entries);
}

/** Reads a JSON token file: an array of `{ name, role, token }`, or `{ tokens: [...] }`. */
export function readTokenFile(path: string): TokenEntry[] {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new InvalidArgumentError(`--auth ${path}: cannot read it as JSON: ${(e as Error).message}`);
  }
  const list = Array.isArray(data) ? data : (data as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list)) throw new InvalidArgumentError(`--auth ${path}: expected an array of { name, role, token } or { "tokens": [...] }.`);
  return unique(list.map((e, i) => checkEntry(e, `--auth ${path} entry ${i + 1}`)));
}

function unique(entries: TokenEntry[]): TokenEntry[] {
  const names = new Set<string>();
  const hashes = new Set<string>();
  for (const e of entries) {
    if (names.has(e.name)) throw new InvalidArgumentError(`The identity "${e.name}" is configured twice.`);
    const h = digest(e.token).toString('hex');
    if (hashes.has(h)) throw new InvalidArgumentError(`Two identities share one token (the second is "${e.name}").`);
    names.add(e.name);
    hashes.add(h);
  }
  return entries;
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Finds the identity of a presented token, comparing with every entry in constant time. */
export class TokenTable {
  readonly #entries: Array<{ identity: Identity; hash: Buffer }>;
  constructor(entries: readonly TokenEntry[]) {
    this.#entries = entries.map((e) => ({ identity: { name: e.name, role: e.role }, hash: digest(e.token) }));
  }
  get size(): number {
    return this.#entries.length;
  }
  identify(presented: string): Identity | null {
    const h = digest(presented);
    let found: Identity | null = null;
    // Every entry is compared, whether or not an earlier one matched.
    for (const e of this.#entries) if (timingSafeEqual(h, e.hash) && !found) found = e.identity;
    return found;
  }
}

/** The bearer token of an Authorization header value, or null. */
export function bearerOf(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer[ \t]+(\S{1,4096})[ \t]*$/i.exec(header);
  return m ? (m[1] as string) : null;
}
