/**
 * @module server/routes/schedules
 * Schedules over HTTP (`engine.schedules`): `GET /api/schedules`, `POST /api/schedules` (create),
 * `GET /api/schedules/:id`, `PUT /api/schedules/:id` (update), `DELETE /api/schedules/:id`, and
 * `POST /api/schedules/:id/{pause,resume,trigger}`. Reading needs `read`, changing `operate`,
 * deleting `delete`.
 */
import type { Engine, ScheduleOptions } from '../../index.ts';
import { EmptyBody, ScheduleBody, ScheduleId, SchedulesQuery, ScheduleUpdateBody } from '../schemas.ts';
import { route, type RouteSpec } from './route.ts';

function options(id: string, body: Omit<ScheduleOptions, 'id'>): ScheduleOptions {
  return { ...body, id } as ScheduleOptions;
}

function commandRoute(engine: Engine, verb: 'pause' | 'resume' | 'trigger'): RouteSpec {
  return route({
    method: 'post',
    path: `/api/schedules/:id/${verb}`,
    summary: verb === 'trigger' ? 'Start a task of the schedule now (outside its ticks)' : `${verb === 'pause' ? 'Pause' : 'Resume'} a schedule`,
    permission: 'operate',
    params: { id: ScheduleId },
    body: EmptyBody,
    responses: { 200: verb === 'trigger' ? '{ taskId }' : 'the schedule', 404: 'unknown schedule' },
    async handle({ params }) {
      const id = params.id as string;
      const body = verb === 'pause' ? await engine.schedules.pause(id) : verb === 'resume' ? await engine.schedules.resume(id) : await engine.schedules.trigger(id);
      return { status: 200, body };
    },
  });
}

export function scheduleRoutes(engine: Engine): RouteSpec[] {
  return [
    route({
      method: 'get',
      path: '/api/schedules',
      summary: 'Schedules, in id order, with their next and last run',
      permission: 'read',
      query: SchedulesQuery,
      responses: { 200: '{ schedules, nextCursor }' },
      async handle({ query }) {
        const limit = query.limit ?? 100;
        const schedules = await engine.schedules.list({
          limit,
          ...(query.workflow !== undefined ? { workflow: query.workflow } : {}),
          ...(query.cursor !== undefined ? { after: query.cursor } : {}),
        });
        return { status: 200, body: { schedules, nextCursor: schedules.length === limit ? (schedules.at(-1)?.id ?? null) : null } };
      },
    }),
    route({
      method: 'post',
      path: '/api/schedules',
      summary: 'Create a schedule (the same definition again: 200, another: 409)',
      permission: 'operate',
      body: ScheduleBody,
      responses: { 201: 'created', 200: 'it existed with this definition', 400: 'bad cron, time zone or option', 409: 'it exists with another definition' },
      async handle({ body }) {
        const { created, ...schedule } = await engine.schedules.create(body as ScheduleOptions);
        return { status: created ? 201 : 200, body: schedule };
      },
    }),
    route({
      method: 'get',
      path: '/api/schedules/:id',
      summary: 'One schedule',
      permission: 'read',
      params: { id: ScheduleId },
      responses: { 200: 'the schedule', 404: 'unknown schedule' },
      async handle({ params }) {
        return { status: 200, body: await engine.schedules.get(params.id as string) };
      },
    }),
    route({
      method: 'put',
      path: '/api/schedules/:id',
      summary: "Replace a schedule's definition (its next tick is computed again from now)",
      permission: 'operate',
      params: { id: ScheduleId },
      body: ScheduleUpdateBody,
      responses: { 200: 'the schedule', 400: 'bad cron, time zone or option', 404: 'unknown schedule' },
      async handle({ params, body }) {
        return { status: 200, body: await engine.schedules.update(options(params.id as string, body as Omit<ScheduleOptions, 'id'>)) };
      },
    }),
    route({
      method: 'delete',
      path: '/api/schedules/:id',
      summary: 'Delete a schedule (the tasks it started stay)',
      permission: 'delete',
      params: { id: ScheduleId },
      responses: { 200: '{ deleted }', 404: 'unknown schedule' },
      async handle({ params }) {
        const { deleted } = await engine.schedules.delete(params.id as string);
        if (!deleted) await engine.schedules.get(params.id as string); // NOT_FOUND, through the status table
        return { status: 200, body: { deleted } };
      },
    }),
    commandRoute(engine, 'pause'),
    commandRoute(engine, 'resume'),
    commandRoute(engine, 'trigger'),
  ];
}
