/**
 * @module server/mount
 * Mounts the JSON routes (`routes/route.ts` specs) and the event streams on the app, each the same
 * way: authenticated, the route's permission checked, the body read within the size limit and
 * parsed, body, query and path validated by the route's zod schemas, and a repeated
 * Idempotency-Key honoured as the route says (replayed from the cache, or left to the engine).
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { IdempotencyCache } from './idempotency.ts';
import { checkIdempotencyKey, IDEMPOTENCY_HEADER } from './idempotency.ts';
import { checkPathEncoding, readJson, requirePermission, type Authenticate, type Env } from './middleware.ts';
import type { ServerMetrics } from './observers/metrics.ts';
import type { StreamRoute } from './routes/events.ts';
import type { RouteSpec } from './routes/route.ts';
import { validate } from './schemas.ts';

export interface MountDeps {
  authenticate: Authenticate;
  tooLarge: MiddlewareHandler<Env>;
  cache: IdempotencyCache;
  logger: Logger;
  metrics: ServerMetrics;
}

/** The handler of one JSON route. */
function routeHandler(spec: RouteSpec, deps: MountDeps): (c: Context<Env>) => Promise<Response> {
  const hit = (c: Context<Env>, actor: string, key: string | undefined): void => {
    deps.logger.info({ msg: 'idempotency hit', path: c.req.path, actor, key });
    deps.metrics.idempotencyHit();
  };
  return async (c) => {
    const identity = c.get('identity');
    requirePermission(identity, spec.permission);
    checkPathEncoding(c.req.url);
    const params: Record<string, string> = {};
    for (const [name, schema] of Object.entries(spec.params ?? {})) params[name] = validate(schema, c.req.param(name), `path parameter ${name}`) as string;
    const query = spec.query ? validate(spec.query, c.req.query(), 'query') : undefined;
    const raw = spec.method === 'post' || spec.method === 'put' ? await readJson(c) : undefined;
    const body = spec.body ? validate(spec.body, raw, 'body') : undefined;
    const idempotencyKey = spec.method === 'post' ? checkIdempotencyKey(c.req.header(IDEMPOTENCY_HEADER)) : undefined;
    const run = () => spec.handle({ identity, params, body, query, idempotencyKey });
    if (spec.idempotency === 'replay' && idempotencyKey !== undefined) {
      const answer = await deps.cache.once(`${identity.name} ${spec.method} ${c.req.path}`, idempotencyKey, body, run);
      if (answer.replayed) hit(c, identity.name, idempotencyKey);
      return c.json(answer.body, answer.status as 200, answer.replayed ? { 'idempotent-replayed': 'true' } : {});
    }
    const answer = await run();
    // The engine kept the key: an answer that says nothing new was created is a hit.
    if (spec.idempotency === 'engine' && (answer.body as { created?: unknown } | null)?.created === false) hit(c, identity.name, idempotencyKey);
    return c.json(answer.body, answer.status as 200);
  };
}

export function mountRoutes(app: Hono<Env>, routes: readonly RouteSpec[], deps: MountDeps): void {
  for (const spec of routes) {
    const handler = routeHandler(spec, deps);
    if (spec.method === 'get') app.get(spec.path, deps.authenticate, handler);
    else if (spec.method === 'delete') app.delete(spec.path, deps.authenticate, handler);
    else if (spec.method === 'put') app.put(spec.path, deps.tooLarge, deps.authenticate, handler);
    else app.post(spec.path, deps.tooLarge, deps.authenticate, handler);
  }
}

export function mountStreams(app: Hono<Env>, streams: readonly StreamRoute[], authenticate: Authenticate): void {
  for (const s of streams)
    app.get(s.path, authenticate, async (c) => {
      requirePermission(c.get('identity'), 'read');
      return s.handle(c);
    });
}
