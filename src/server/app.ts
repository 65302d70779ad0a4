/**
 * @module server/app
 * `createServer(engine, options)`: the HTTP API and the dashboard as one Hono app, usable with
 * `app.request()` in tests (no port), mounted in a user's own Hono app (`app.route('/', server.app)`),
 * passed to any Node server (`server.fetch`), or listening on a port (`server.listen()`).
 *
 * Every JSON route is mounted the same way: the caller is identified by a bearer token (or the
 * dashboard's session cookie), its role checked against the route's permission, the body read
 * within the size limit and parsed, body, query and path validated by the route's zod schemas,
 * and any error mapped to its status by one handler (`http-errors.ts`).
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie } from 'hono/cookie';
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import { InvalidArgumentError, systemClock, type Clock, type Engine } from '../index.ts';
import { bearerOf, can, rolesWith, TokenTable, type Identity, type Permission, type TokenEntry } from './auth.ts';
import { errorResponse, HttpRefusal } from './http-errors.ts';
import { checkIdempotencyKey, IdempotencyCache, IDEMPOTENCY_HEADER } from './idempotency.ts';
import { buildOpenApi } from './openapi.ts';
import { approvalRoutes } from './routes/approvals.ts';
import { eventRoutes } from './routes/events.ts';
import type { RouteSpec } from './routes/route.ts';
import { taskRoutes } from './routes/tasks.ts';
import { validate } from './schemas.ts';
import { dashboardRoutes, SESSION_COOKIE, CSRF_HEADER } from './dashboard/routes.ts';
import { ServerMetrics } from './observers/metrics.ts';

export interface ServerOptions {
  /** Who may call: `{ name, role, token }` entries (see `parseTokenList`, `readTokenFile`). Required, at least one. */
  tokens: readonly TokenEntry[];
  /** Largest request body accepted; larger ones get 413. @defaultValue 1 MiB */
  bodyLimitBytes?: number;
  /** Where request logs go (pino). @defaultValue silent */
  logger?: Logger;
  /** Prometheus metrics to serve at `/metrics` (the same object given to the engine as an observer). @defaultValue metrics of this server only */
  metrics?: ServerMetrics;
  /** Whether `/metrics` answers without a token (for a scraper inside a private network). @defaultValue false */
  publicMetrics?: boolean;
  /** Serve the dashboard at `/`. @defaultValue true */
  dashboard?: boolean;
  /** Source of now (for idempotency expiry). @defaultValue the engine's clock */
  clock?: Clock;
  /** How long a replayed answer (cancel, retry, pause, resume) is kept. @defaultValue 24 hours */
  idempotencyTtlMs?: number;
  /** Interval of SSE keep-alive comments. @defaultValue 15 s */
  keepAliveMs?: number;
}

export interface StepwiseServer {
  /** The Hono app (mount it, or call `app.request()`). */
  app: Hono<Env>;
  fetch: (request: Request) => Response | Promise<Response>;
  /** The OpenAPI 3.1 document of the JSON API. */
  openapi: Record<string, unknown>;
  /** Replays served from the idempotency cache so far. */
  readonly idempotencyHits: number;
  /** Starts listening (port 0: any free port). */
  listen(options?: { port?: number; hostname?: string }): Promise<{ url: string; port: number; close(): Promise<void> }>;
}

export type Env = { Variables: { identity: Identity; viaCookie: boolean } };

/** The authenticated identity of a request, or a 401. */
function identify(c: Context<Env>, table: TokenTable): { identity: Identity; viaCookie: boolean } {
  const header = c.req.header('authorization');
  const bearer = bearerOf(header);
  if (header !== undefined && bearer === null) throw new HttpRefusal(401, 'UNAUTHORIZED', 'The Authorization header must be "Bearer <token>".');
  const cookie = bearer === null ? getCookie(c, SESSION_COOKIE) : undefined;
  const token = bearer ?? cookie;
  if (!token) throw new HttpRefusal(401, 'UNAUTHORIZED', 'A bearer token is required: send "Authorization: Bearer <token>".');
  const identity = token.length <= 4096 ? table.identify(token) : null;
  if (!identity) throw new HttpRefusal(401, 'UNAUTHORIZED', 'The token is not valid.');
  return { identity, viaCookie: bearer === null };
}

export function requirePermission(identity: Identity, permission: Permission): void {
  if (!can(identity, permission)) {
    const roles = rolesWith(permission);
    throw new HttpRefusal(403, 'FORBIDDEN', `${identity.name} (${identity.role}) may not do this: it needs the role ${roles.join(' or ')}.`, { requiredRoles: roles });
  }
}

async function readJson(c: Context<Env>): Promise<unknown> {
  const text = await c.req.text();
  if (!text.trim()) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new InvalidArgumentError(`The body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The API and dashboard for `engine`.
 * @example
 * const server = createServer(engine, { tokens: parseTokenList(process.env.STEPWISE_TOKENS ?? '') });
 * const { url } = await server.listen({ port: 8080 });
 */
export function createServer(engine: Engine, options: ServerOptions): StepwiseServer {
  if (!Array.isArray(options?.tokens) || options.tokens.length === 0) {
    throw new InvalidArgumentError('createServer() needs at least one token ({ name, role, token }); the API never runs without authentication.');
  }
  const table = new TokenTable(options.tokens);
  const logger = options.logger ?? pino({ level: 'silent' });
  const clock = options.clock ?? engine.clock ?? systemClock;
  const cache = new IdempotencyCache(clock, options.idempotencyTtlMs);
  const metrics = options.metrics ?? new ServerMetrics();
  metrics.watchEngine(engine);
  const limit = options.bodyLimitBytes ?? 1024 * 1024;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError('bodyLimitBytes must be a whole number ≥ 1.');

  const routes: RouteSpec[] = [...taskRoutes(engine), ...approvalRoutes(engine)];
  const streams = eventRoutes(engine, options.keepAliveMs ?? 15_000);
  const openapi = buildOpenApi([...routes, ...streams.specs]);

  const app = new Hono<Env>();

  app.use('*', async function requestLog(c, next) {
    const started = performance.now();
    await next();
    c.header('x-content-type-options', 'nosniff');
    const identity = c.get('identity') as Identity | undefined;
    const ms = Math.round(performance.now() - started);
    // The path without the query; never a header (the Authorization header carries the token).
    logger.info({ msg: 'request', method: c.req.method, path: c.req.path, status: c.res.status, actor: identity?.name, ms });
    metrics.request(c.req.method, c.res.status);
  });

  app.onError((e, c) => {
    const { status, body } = errorResponse(e);
    if (status >= 500) logger.error({ msg: 'request failed', method: c.req.method, path: c.req.path, err: e });
    return c.json(body, status as 400);
  });
  app.notFound((c) => c.json({ error: { code: 'NOT_FOUND', message: `No route ${c.req.method} ${c.req.path}. The API is described at /api/openapi.json.` } }, 404));

  const tooLarge = bodyLimit({
    maxSize: limit,
    // The rest of the body is not read, so the connection cannot carry another request: say so,
    // or a keep-alive client would send its next request down a socket that is being closed.
    onError: (c) => c.json({ error: { code: 'PAYLOAD_TOO_LARGE', message: `The request body is over the limit of ${limit} bytes.`, limitBytes: limit } }, 413, { connection: 'close' }),
  });

  /** Authentication for API and dashboard requests; cookie-authenticated writes must carry the CSRF header. */
  const authenticate = async (c: Context<Env>, next: () => Promise<void>): Promise<void> => {
    const { identity, viaCookie } = identify(c, table);
    if (viaCookie && c.req.method !== 'GET' && c.req.header(CSRF_HEADER) !== '1') {
      throw new HttpRefusal(403, 'FORBIDDEN', `A write with the session cookie must carry the ${CSRF_HEADER} header (sent by the dashboard's own script).`);
    }
    c.set('identity', identity);
    c.set('viaCookie', viaCookie);
    await next();
  };

  app.get('/healthz', async (c) => {
    try {
      await engine.ready();
      return c.json({ ok: true });
    } catch (e) {
      return c.json({ ok: false, error: errorResponse(e).body.error }, 503);
    }
  });

  app.get('/metrics', async (c, next) => (options.publicMetrics ? next() : authenticate(c, next)), async (c) => {
    return c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType });
  });

  app.get('/api/openapi.json', (c) => c.json(openapi));

  for (const spec of routes) {
    const handler = async (c: Context<Env>): Promise<Response> => {
      const identity = c.get('identity');
      requirePermission(identity, spec.permission);
      const params: Record<string, string> = {};
      for (const [name, schema] of Object.entries(spec.params ?? {})) params[name] = validate(schema, c.req.param(name), `path parameter ${name}`) as string;
      const query = spec.query ? validate(spec.query, c.req.query(), 'query') : undefined;
      const raw = spec.method === 'post' ? await readJson(c) : undefined;
      const body = spec.body ? validate(spec.body, raw, 'body') : undefined;
      const idempotencyKey = spec.method === 'post' ? checkIdempotencyKey(c.req.header(IDEMPOTENCY_HEADER)) : undefined;
      const run = () => spec.handle({ identity, params, body, query, idempotencyKey });
      if (spec.idempotency === 'replay' && idempotencyKey !== undefined) {
        const answer = await cache.once(`${identity.name} ${spec.method} ${c.req.path}`, idempotencyKey, body, run);
        if (answer.replayed) {
          logger.info({ msg: 'idempotency hit', path: c.req.path, actor: identity.name, key: idempotencyKey });
          metrics.idempotencyHit();
        }
        return c.json(answer.body, answer.status as 200, answer.replayed ? { 'idempotent-replayed': 'true' } : {});
      }
      const answer = await run();
      // The engine kept the key: an answer that says nothing new was created is a hit.
      if (spec.idempotency === 'engine' && (answer.body as { created?: unknown } | null)?.created === false) {
        logger.info({ msg: 'idempotency hit', path: c.req.path, actor: identity.name, key: idempotencyKey });
        metrics.idempotencyHit();
      }
      return c.json(answer.body, answer.status as 200);
    };
    if (spec.method === 'get') app.get(spec.path, authenticate, handler);
    else if (spec.method === 'delete') app.delete(spec.path, authenticate, handler);
    else app.post(spec.path, tooLarge, authenticate, handler);
  }
  for (const s of streams.mount) app.get(s.path, authenticate, async (c) => {
    requirePermission(c.get('identity'), 'read');
    return s.handle(c);
  });
  // Any other method on an API path: 405 rather than a confusing 404.
  app.all('/api/*', (c) => c.json({ error: { code: 'METHOD_NOT_ALLOWED', message: `${c.req.method} is not allowed on ${c.req.path}.` } }, c.req.method === 'GET' ? 404 : 405));

  if (options.dashboard !== false) dashboardRoutes(app, { engine, table, authenticate, limit });

  return {
    app,
    fetch: (request: Request) => app.fetch(request),
    openapi,
    get idempotencyHits() {
      return cache.hits;
    },
    listen(listenOptions = {}) {
      return new Promise((resolve, reject) => {
        let server: ServerType;
        try {
          server = serve({ fetch: app.fetch, port: listenOptions.port ?? 8080, ...(listenOptions.hostname ? { hostname: listenOptions.hostname } : {}) }, (info: AddressInfo) => {
            const host = info.family === 'IPv6' ? `[${info.address}]` : info.address;
            resolve({
              url: `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${info.port}`,
              port: info.port,
              close: () => new Promise<void>((done) => {
                (server as import('node:http').Server).closeAllConnections?.();
                server.close(() => done());
              }),
            });
          });
          server.on('error', reject);
        } catch (e) {
          reject(e);
        }
      });
    },
  };
}
