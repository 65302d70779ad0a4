/**
 * @module server/middleware
 * What every request goes through: its log line and metrics, the body size limit, and
 * authentication (a bearer token, or the dashboard's session cookie — a session id, see `sessions.ts` — with the CSRF header on
 * writes), with the permission check of a route and the JSON body reader.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie } from 'hono/cookie';
import type { Logger } from 'pino';
import { InvalidArgumentError } from '../index.ts';
import { bearerOf, can, rolesWith, type Identity, type Permission, type TokenTable } from './auth.ts';
import { HttpRefusal } from './http-errors.ts';
import type { ServerMetrics } from './observers/metrics.ts';
import type { SessionTable } from './sessions.ts';

export const SESSION_COOKIE = 'stepwise_session';
/** The header the dashboard's script sends with every write (a cross-site form cannot). */
export const CSRF_HEADER = 'x-stepwise-csrf';

export type Env = { Variables: { identity: Identity; viaCookie: boolean } };

/** The authenticated identity of a request (a bearer token, or a dashboard session's cookie), or a 401. */
function identify(c: Context<Env>, table: TokenTable, sessions: SessionTable): { identity: Identity; viaCookie: boolean } {
  const header = c.req.header('authorization');
  const bearer = bearerOf(header);
  if (header !== undefined && bearer === null) throw new HttpRefusal(401, 'UNAUTHORIZED', 'The Authorization header must be "Bearer <token>".');
  if (bearer !== null) {
    const identity = table.identify(bearer);
    if (!identity) throw new HttpRefusal(401, 'UNAUTHORIZED', 'The token is not valid.');
    return { identity, viaCookie: false };
  }
  const session = getCookie(c, SESSION_COOKIE);
  if (!session) throw new HttpRefusal(401, 'UNAUTHORIZED', 'A bearer token is required: send "Authorization: Bearer <token>".');
  const identity = sessions.identify(session);
  if (!identity) throw new HttpRefusal(401, 'UNAUTHORIZED', 'The session has ended (signed out or expired): sign in again.');
  return { identity, viaCookie: true };
}

export function requirePermission(identity: Identity, permission: Permission): void {
  if (!can(identity, permission)) {
    const roles = rolesWith(permission);
    throw new HttpRefusal(403, 'FORBIDDEN', `${identity.name} (${identity.role}) may not do this: it needs the role ${roles.join(' or ')}.`, { requiredRoles: roles });
  }
}

/** How deep arrays and objects of a JSON body may nest. */
export const MAX_JSON_DEPTH = 512;

/**
 * Whether `text` nests arrays and objects deeper than `max`, found by one pass over the text
 * (brackets inside strings do not count). Checked before parsing: a deeper value parses, but every
 * recursive walk of it afterwards (validation, fingerprints, storage) would overflow the stack.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
}

export async function readJson(c: Context<Env>): Promise<unknown> {
  const text = await c.req.text();
  if (!text.trim()) return {};
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new HttpRefusal(400, 'INVALID_ARGUMENT', `The body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels, the limit: flatten it.`, { maxDepth: MAX_JSON_DEPTH });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new InvalidArgumentError(`The body is not valid JSON: ${(e as Error).message}`);
  }
}

/** One log line and the request metrics per request; `nosniff` on every answer. */
export function requestLog(logger: Logger, metrics: ServerMetrics): MiddlewareHandler<Env> {
  return async function requestLog(c, next) {
    const started = performance.now();
    await next();
    c.header('x-content-type-options', 'nosniff');
    const identity = c.get('identity') as Identity | undefined;
    const ms = Math.round(performance.now() - started);
    // The path without the query; never a header (the Authorization header carries the token).
    logger.info({ msg: 'request', method: c.req.method, path: c.req.path, status: c.res.status, actor: identity?.name, ms });
    metrics.request(c.req.method, c.res.status);
  };
}

/**
 * The body size limit. The rest of the body is not read, so the connection cannot carry another
 * request: say so, or a keep-alive client would send its next request down a socket that is being closed.
 */
export function tooLarge(limit: number): MiddlewareHandler<Env> {
  return bodyLimit({
    maxSize: limit,
    onError: async (c) => {
      await drainBody(c.req.raw, DRAIN_MAX_BYTES, DRAIN_MAX_MS);
      return c.json({ error: { code: 'PAYLOAD_TOO_LARGE', message: `The request body is over the limit of ${limit} bytes.`, limitBytes: limit } }, 413, { connection: 'close' });
    },
  });
}

/** How much of a refused body the server reads and drops so that the client hears the 413. */
const DRAIN_MAX_BYTES = 32 * 1024 * 1024;
const DRAIN_MAX_MS = 5000;

/**
 * Reads and drops the rest of a refused request body, up to `maxBytes` and `maxMs`. A client
 * still uploading when the server answers and closes the socket sees a broken connection
 * (`fetch failed`) instead of the 413 that says what to do; a body beyond the bounds is cut off.
 */
async function drainBody(req: Request, maxBytes: number, maxMs: number): Promise<void> {
  const body = req.body;
  if (!body || body.locked) return;
  const reader = body.getReader();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, maxMs);
  });
  const read = async (): Promise<void> => {
    for (let bytes = 0; bytes <= maxBytes;) {
      const { done, value } = await reader.read();
      if (done) return;
      bytes += value.byteLength;
    }
  };
  try {
    await Promise.race([read(), late]);
  } catch {
    // The client went away: nothing to drain.
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => undefined);
  }
}

/**
 * Refuses a path with a malformed percent-encoding (`%E0%A4%A`): the router would pass such a
 * segment on undecoded, and a name such as a signal's would be stored as the literal text.
 */
export function checkPathEncoding(url: string): void {
  const path = new URL(url).pathname;
  for (const segment of path.split('/')) {
    if (!segment.includes('%')) continue;
    try {
      decodeURIComponent(segment);
    } catch {
      throw new InvalidArgumentError(`The path segment "${segment.slice(0, 200)}" is not valid percent-encoding (UTF-8 bytes as %XX): encode names with encodeURIComponent.`);
    }
  }
}

export type Authenticate = (c: Context<Env>, next: () => Promise<void>) => Promise<void>;

/** Authentication for API and dashboard requests; cookie-authenticated writes must carry the CSRF header. */
export function authenticator(table: TokenTable, sessions: SessionTable): Authenticate {
  return async function authenticate(c, next) {
    const { identity, viaCookie } = identify(c, table, sessions);
    if (viaCookie && c.req.method !== 'GET' && c.req.header(CSRF_HEADER) !== '1') {
      throw new HttpRefusal(403, 'FORBIDDEN', `A write with the session cookie must carry the ${CSRF_HEADER} header (sent by the dashboard's own script).`);
    }
    c.set('identity', identity);
    c.set('viaCookie', viaCookie);
    await next();
  };
}
