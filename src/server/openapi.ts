/**
 * @module server/openapi
 * The OpenAPI 3.1 document of the JSON API, built from the route list: each route's path,
 * permission, responses and the JSON Schema of its body, query and path parameters, converted from
 * the zod schemas that validate those requests (`z.toJSONSchema`).
 */
import { z } from 'zod';
import type { RouteSpec } from './routes/route.ts';

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> => {
  const s = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete s.$schema;
  return s;
};

const ERROR = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'a stable code (ERROR_CODES), UNAUTHORIZED, NOT_FOUND or INTERNAL' },
        message: { type: 'string' },
        legalEvents: { type: 'array', items: { type: 'string' }, description: 'on ILLEGAL_TRANSITION: what the task accepts now' },
      },
    },
  },
};

export function buildOpenApi(routes: readonly RouteSpec[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [name, schema] of Object.entries(r.params ?? {})) parameters.push({ name, in: 'path', required: true, schema: jsonSchema(schema) });
    if (r.query) {
      const q = jsonSchema(r.query);
      const props = (q.properties ?? {}) as Record<string, Record<string, unknown>>;
      const required = new Set((q.required ?? []) as string[]);
      for (const [name, schema] of Object.entries(props))
        parameters.push({ name, in: 'query', required: required.has(name), schema, ...(schema.description ? { description: schema.description } : {}) });
    }
    if (r.method === 'post') {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        schema: { type: 'string', maxLength: 255 },
        description: r.idempotency === 'replay' ? 'a retried POST returns the first answer' : "passed to the engine as the command's idempotency key",
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, description] of Object.entries(r.responses)) {
      responses[status] = Number(status) >= 400 ? { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } : { description };
    }
    responses['401'] = { description: 'no valid bearer token', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    responses['403'] ??= { description: `the role may not (needs the ${r.permission} right)`, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[r.method] = {
      summary: r.summary,
      'x-permission': r.permission,
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(r.body) } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Stepwise API', version: '1', description: 'Tasks, approvals and their event logs. Every request needs "Authorization: Bearer <token>".' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } }, schemas: { Error: ERROR } },
    security: [{ bearer: [] }],
    paths,
  };
}
