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
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import { Hono } from 'hono';
import pino, { type Logger } from 'pino';
import { InvalidArgumentError, systemClock, type Clock, type Engine } from '../index.ts';
import { TokenTable, type TokenEntry } from './auth.ts';
import { errorResponse } from './http-errors.ts';
import { IdempotencyCache } from './idempotency.ts';
import { listen } from './listen.ts';
import { authenticator, requestLog, tooLarge, type Env } from './middleware.ts';
import { mountRoutes, mountStreams } from './mount.ts';
import { buildOpenApi } from './openapi.ts';
import { SessionTable } from './sessions.ts';
import { approvalRoutes } from './routes/approvals.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { alertRoutes } from './routes/alerts.ts';
import { eventRoutes } from './routes/events.ts';
import type { RouteSpec } from './routes/route.ts';
import { rerunRoutes } from './routes/rerun.ts';
import { bulkRoute } from './routes/bulk.ts';
import { taskRoutes } from './routes/tasks.ts';
import { dashboardRoutes } from './dashboard/routes.ts';
import { ServerMetrics } from './observers/metrics.ts';

/** Room for the JSON around a payload (keys, flags) in the default body limit. */
const ENVELOPE_BYTES = 64 * 1024;

export interface ServerOptions {
  /** Who may call: `{ name, role, token }` entries (see `parseTokenList`, `readTokenFile`). Required, at least one. */
  tokens: readonly TokenEntry[];
  /**
   * Largest request body accepted; larger ones get 413.
   * @defaultValue the engine's signal payload limit (`limits.payloadBytes`, 1 MiB) plus 64 KiB for the envelope around it
   */
  bodyLimitBytes?: number;
  /** Where request logs go (pino). @defaultValue silent */
  logger?: Logger;
  /** Prometheus metrics to serve at `/metrics` (the same object given to the engine as an observer). @defaultValue metrics of this server only */
  metrics?: ServerMetrics;
  /** Whether `/metrics` answers without a token (for a scraper inside a private network). @defaultValue false */
  publicMetrics?: boolean;
  /** Serve the dashboard at `/`. @defaultValue true */
  dashboard?: boolean;
  /** Serve the MCP server (streamable HTTP) at `/mcp`, as each request's token. @defaultValue true */
  mcp?: boolean;
  /** Source of now (for idempotency expiry). @defaultValue the engine's clock */
  clock?: Clock;
  /** How long a replayed answer (cancel, retry, pause, resume) is kept. @defaultValue 24 hours */
  idempotencyTtlMs?: number;
  /** Total bytes of the replayed answers kept (the oldest are dropped past it). @defaultValue 16 MiB */
  idempotencyCacheBytes?: number;
  /**
   * The largest JSON of one value (input, output, error, …) that a list or a command's answer
   * carries whole; a larger one is cut to its first bytes, named in `truncated`. @defaultValue 4 KiB
   */
  summaryValueBytes?: number;
  /** The largest body of a list page: the page stops early, with a cursor, when it reaches it. @defaultValue 4 MiB */
  maxResponseBytes?: number;
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

/** A size option: `value` (a whole number ≥ `min`) or its default. */
function whole(value: number | undefined, fallback: number, name: string, min = 1): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < min) throw new InvalidArgumentError(`${name} must be a whole number ≥ ${min}, got ${String(value)}.`);
  return v;
}

/**
 * The API and dashboard for `engine`.
 * @example
 * const server = createServer(engine, { tokens: parseTokenList(process.env.STEPWISE_TOKENS ?? '') });
 * const { url } = await server.listen({ port: 8080 });
 */
/** Every option of `createServer()`; a key not listed is refused. */
const SERVER_OPTIONS = optionNames<ServerOptions>()(
  'tokens',
  'bodyLimitBytes',
  'logger',
  'metrics',
  'publicMetrics',
  'dashboard',
  'mcp',
  'clock',
  'idempotencyTtlMs',
  'idempotencyCacheBytes',
  'summaryValueBytes',
  'maxResponseBytes',
  'keepAliveMs',
);

export function createServer(engine: Engine, options: ServerOptions): StepwiseServer {
  checkOptionKeys(options, SERVER_OPTIONS, 'createServer()');
  if (!Array.isArray(options?.tokens) || options.tokens.length === 0) {
    throw new InvalidArgumentError('createServer() needs at least one token ({ name, role, token }); the API never runs without authentication.');
  }
  const table = new TokenTable(options.tokens);
  const logger = options.logger ?? pino({ level: 'silent' });
  const clock = options.clock ?? engine.clock ?? systemClock;
  const cache = new IdempotencyCache(clock, {
    ...(options.idempotencyTtlMs !== undefined ? { ttlMs: options.idempotencyTtlMs } : {}),
    maxBytes: whole(options.idempotencyCacheBytes, 16 * 1024 * 1024, 'idempotencyCacheBytes'),
  });
  const summaries = { valueBytes: whole(options.summaryValueBytes, 4096, 'summaryValueBytes', 16), bodyBytes: whole(options.maxResponseBytes, 4 * 1024 * 1024, 'maxResponseBytes', 1024) };
  const metrics = options.metrics ?? new ServerMetrics();
  metrics.watchEngine(engine);
  // A payload of exactly the engine's limit must fit, with the JSON around it (`{"payload": …, "idempotencyKey": …}`).
  const limit = whole(options.bodyLimitBytes, (engine.limits?.payloadBytes ?? 1024 * 1024) + ENVELOPE_BYTES, 'bodyLimitBytes');

  const routes: RouteSpec[] = [
    ...taskRoutes(engine, summaries),
    ...rerunRoutes(engine, summaries),
    bulkRoute(engine),
    ...approvalRoutes(engine, summaries),
    ...scheduleRoutes(engine),
    ...alertRoutes(engine),
  ];
  const streams = eventRoutes(engine, options.keepAliveMs ?? 15_000);
  const openapi = buildOpenApi([...routes, ...streams.specs]);

  const app = new Hono<Env>();
  app.use('*', requestLog(logger, metrics));
  app.onError((e, c) => {
    const { status, body } = errorResponse(e);
    if (status >= 500) logger.error({ msg: 'request failed', method: c.req.method, path: c.req.path, err: e });
    return c.json(body, status as 400);
  });
  app.notFound((c) => c.json({ error: { code: 'NOT_FOUND', message: `No route ${c.req.method} ${c.req.path}. The API is described at /api/openapi.json.` } }, 404));
  const sessions = new SessionTable(clock);
  const authenticate = authenticator(table, sessions);

  app.get('/healthz', async (c) => {
    try {
      await engine.ready();
      return c.json({ ok: true });
    } catch (e) {
      return c.json({ ok: false, error: errorResponse(e).body.error }, 503);
    }
  });

  app.get(
    '/metrics',
    async (c, next) => (options.publicMetrics ? next() : authenticate(c, next)),
    async (c) => {
      return c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType });
    },
  );

  app.get('/api/openapi.json', (c) => c.json(openapi));

  mountRoutes(app, routes, { authenticate, tooLarge: tooLarge(limit), cache, logger, metrics });
  // MCP over streamable HTTP, as the token's identity (server/mcp/); the SDK loads on first use.
  if (options.mcp !== false) {
    app.all('/mcp', tooLarge(limit), authenticate, async (c) => (await import('./mcp/http.ts')).handleMcp(engine, c.get('identity'), summaries, c.req.raw));
  }
  mountStreams(app, streams.mount, authenticate);
  // Any other method on an API path: 405 rather than a confusing 404.
  app.all('/api/*', (c) => c.json({ error: { code: 'METHOD_NOT_ALLOWED', message: `${c.req.method} is not allowed on ${c.req.path}.` } }, c.req.method === 'GET' ? 404 : 405));

  if (options.dashboard !== false) dashboardRoutes(app, { engine, table, sessions, summaries, authenticate, limit });

  return {
    app,
    fetch: (request: Request) => app.fetch(request),
    openapi,
    get idempotencyHits() {
      return cache.hits;
    },
    listen: (listenOptions = {}) => listen(app, listenOptions),
  };
}
