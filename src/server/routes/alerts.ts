/**
 * @module server/routes/alerts
 * The alerts workers raised, over HTTP (`engine.alerts`): `GET /api/alerts`, newest first, by
 * kind, workflow or task, paged with `cursor`. Needs `read`.
 */
import type { z } from 'zod';
import type { AlertsQuery as EngineAlertsQuery, Engine } from '../../index.ts';
import { AlertsQuery } from '../schemas.ts';
import { route, type RouteSpec } from './route.ts';

/** `engine.alerts`' query from the checked query string (the API's and the dashboard's). */
export function alertsQueryOf(q: z.infer<typeof AlertsQuery>, limit: number): EngineAlertsQuery {
  return {
    limit,
    ...(q.kind !== undefined ? { kind: q.kind } : {}),
    ...(q.workflow !== undefined ? { workflow: q.workflow } : {}),
    ...(q.taskId !== undefined ? { taskId: q.taskId } : {}),
    ...(q.cursor !== undefined ? { before: q.cursor } : {}),
  };
}

export function alertRoutes(engine: Engine): RouteSpec[] {
  return [
    route({
      method: 'get',
      path: '/api/alerts',
      summary: 'Alerts the workers raised, newest first',
      permission: 'read',
      query: AlertsQuery,
      responses: { 200: '{ alerts, nextCursor }', 400: 'bad filter' },
      async handle({ query }) {
        const limit = query.limit ?? 100;
        const alerts = await engine.alerts(alertsQueryOf(query, limit));
        return { status: 200, body: { alerts, nextCursor: alerts.length === limit ? (alerts.at(-1)?.id ?? null) : null } };
      },
    }),
  ];
}
