/**
 * @module server/routes/route
 * One JSON API route as data: method, path, the right it needs, the zod schemas of its body and
 * query, and its handler. `app.ts` mounts every route the same way (authentication, permission,
 * body parsing and limits, validation, idempotency, error mapping), and `openapi.ts` documents the
 * same list, so a route cannot be served without being documented or validated.
 */
import type { z } from 'zod';
import type { Engine } from '../../index.ts';
import type { Identity, Permission } from '../auth.ts';

export interface ApiRequest<B = unknown, Q = unknown> {
  identity: Identity;
  params: Record<string, string>;
  body: B;
  query: Q;
  /** The Idempotency-Key header, when sent. */
  idempotencyKey: string | undefined;
}

export interface ApiAnswer {
  status: number;
  body: unknown;
}

export interface RouteSpec {
  method: 'get' | 'post' | 'put' | 'delete';
  /** Hono path syntax (`/api/tasks/:id`). */
  path: string;
  summary: string;
  permission: Permission;
  params?: Record<string, z.ZodType>;
  body?: z.ZodType;
  query?: z.ZodType;
  /**
   * How a repeated Idempotency-Key is honoured: `engine` (the handler passes it to the engine,
   * which keeps it durably) or `replay` (the server keeps the first answer).
   */
  idempotency?: 'engine' | 'replay';
  /** Status codes and what they mean, for the OpenAPI document. */
  responses: Record<number, string>;
  handle(req: ApiRequest<any, any>): Promise<ApiAnswer>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface RouteContext {
  engine: Engine;
}

/** Declares a route with its body and query types inferred from its schemas. */
export function route<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(
  spec: Omit<RouteSpec, 'handle' | 'body' | 'query'> & {
    body?: B;
    query?: Q;
    handle(req: ApiRequest<B extends z.ZodType ? z.output<B> : undefined, Q extends z.ZodType ? z.output<Q> : undefined>): Promise<ApiAnswer>;
  },
): RouteSpec {
  return spec as RouteSpec;
}
