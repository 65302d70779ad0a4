/**
 * @module server/routes/alerts
 * The alerts workers raised, over HTTP (`engine.alerts`): `GET /api/alerts`, newest first, by
 * kind, workflow or task, paged with `cursor`. Needs `read`.
 */
import type { Engine } from '../../index.ts';
import { AlertsQuery } from '../schemas.ts';
import { route, type RouteSpec } from './route.ts';

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
        const alerts = await engine.alerts({
          limit,
          ...(query.kind !== undefined ? { kind: query.kind } : {}),
          ...(query.workflow !== undefined ? { workflow: query.workflow } : {}),
          ...(query.taskId !== undefined ? { taskId: query.taskId } : {}),
          ...(query.cursor !== undefined ? { before: query.cursor } : {}),
        });
        return { status: 200, body: { alerts, nextCursor: alerts.length === limit ? (alerts.at(-1)?.id ?? null) : null } };
      },
    }),
  ];
}
