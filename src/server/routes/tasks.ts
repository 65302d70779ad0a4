/**
 * @module server/routes/tasks
 * The task routes: start (one or a batch), list, get, cancel, retry, pause, resume, signal, a state
 * machine's events (send), delete and purge.
 * The actor of every command is the authenticated identity; nothing in a body can name another.
 */
import { createHash } from 'node:crypto';
import type { Engine, StartOptions } from '../../index.ts';
import type { Identity } from '../auth.ts';
import { BatchBody, CancelBody, EmptyBody, EventName, ListQuery, PurgeBody, SendBody, SignalBody, SignalName, StartBody, TaskId } from '../schemas.ts';
import { InvalidArgumentError } from '../../index.ts';
import { errorResponse } from '../http-errors.ts';
import { listPage, summarizeTask, type SummaryLimits } from '../summaries.ts';
import { route, type RouteSpec } from './route.ts';
import { queryFilter } from '../list-filter.ts';
import type { z } from 'zod';

/** The actor recorded in the task's log for a request of `identity`. */
export const actorOf = (identity: Identity): { kind: 'user'; id: string } => ({ kind: 'user', id: identity.name });

/** The idempotency key of a request: the body's, the header's, or both when they agree. */
function keyOf(body: { idempotencyKey?: string | undefined }, header: string | undefined): string | undefined {
  if (body.idempotencyKey !== undefined && header !== undefined && body.idempotencyKey !== header) {
    throw new InvalidArgumentError("The Idempotency-Key header and the body's idempotencyKey differ: send one, or the same value in both.");
  }
  return body.idempotencyKey ?? header;
}

function startOptions(identity: Identity, body: z.output<typeof StartBody>, key: string | undefined): StartOptions {
  return {
    by: actorOf(identity),
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    ...(body.delayMs !== undefined ? { delay: body.delayMs } : {}),
    ...(body.title !== undefined ? { title: body.title } : {}),
    ...(body.debounce !== undefined
      ? { debounce: { key: body.debounce.key, period: body.debounce.period, ...(body.debounce.maxWait !== undefined ? { maxWait: body.debounce.maxWait } : {}) } }
      : {}),
    ...(body.singleton !== undefined ? { singleton: body.singleton } : {}),
    ...(body.priority !== undefined ? { priority: body.priority } : {}),
    ...(body.tags !== undefined ? { tags: body.tags } : {}),
    ...(body.version !== undefined ? { version: body.version } : {}),
  };
}

const id = { id: TaskId };

/**
 * The key of a batch item without its own: `batch:` and the SHA-256 of the header key and the
 * index (70 characters whatever the header key's length). A hash of the pair, so no derived key
 * equals another item's own key (which `<key>:<index>` could) and a 255-character header key fits.
 */
export function batchItemKey(headerKey: string, index: number): string {
  return `batch:${createHash('sha256')
    .update(JSON.stringify([headerKey, index]))
    .digest('hex')}`;
}

/** Start a task. */
function startRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks',
    summary: 'Start a task',
    permission: 'operate',
    body: StartBody,
    idempotency: 'engine',
    responses: {
      201: 'created',
      200: 'the task of an idempotency key used before, of a debounce key not yet claimed, or a joined singleton',
      400: 'invalid input',
      404: 'unknown workflow',
      409: 'the key belongs to other work, or a live task holds the singleton key (SINGLETON_RUNNING)',
    },
    async handle({ identity, body, idempotencyKey }) {
      const key = keyOf(body, idempotencyKey);
      const handle = await engine.start(body.workflow, body.input, startOptions(identity, body, key));
      return { status: handle.created ? 201 : 200, body: handle.toJSON() };
    },
  });
}

/** Start many tasks, each on its own. */
function batchRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/batch',
    summary: 'Start many tasks (each item like POST /api/tasks)',
    permission: 'operate',
    body: BatchBody,
    idempotency: 'engine',
    responses: { 200: 'one result per item, in order: { task } or { error }', 400: 'invalid input' },
    async handle({ identity, body, idempotencyKey }) {
      // Each item is started on its own (one bad item does not stop the others); with a header
      // key, an item without its own key gets one derived from the header key and its index, so a
      // retried batch creates nothing twice.
      const results = [];
      for (const [i, item] of body.tasks.entries()) {
        const key = item.idempotencyKey ?? (idempotencyKey !== undefined ? batchItemKey(idempotencyKey, i) : undefined);
        try {
          const handle = await engine.start(item.workflow, item.input, startOptions(identity, item, key));
          results.push({ task: handle.toJSON() });
        } catch (e) {
          const { status, body: err } = errorResponse(e);
          if (status >= 500) throw e;
          results.push({ status, ...err });
        }
      }
      return { status: 200, body: { results } };
    },
  });
}

/** List tasks. */
function listRoute(engine: Engine, limits: SummaryLimits): RouteSpec {
  return route({
    method: 'get',
    path: '/api/tasks',
    summary: 'List tasks, newest first',
    permission: 'read',
    query: ListQuery,
    responses: {
      200: '{ tasks, nextCursor, limitedBy? }: summaries (large values cut, named in `truncated`; `url` has the whole task), the page cut short when its body reaches the ceiling',
      400: 'bad filter',
    },
    async handle({ query }) {
      return { status: 200, body: await listPage(engine, queryFilter(query), query.limit ?? 50, limits) };
    },
  });
}

/** Delete finished tasks by age. */
function purgeRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/purge',
    summary: 'Delete finished tasks that ended at least olderThan ago (dryRun: count them)',
    permission: 'delete',
    body: PurgeBody,
    responses: { 200: '{ count, byStatus, dryRun }', 400: 'bad olderThan, status or workflow' },
    async handle({ identity, body }) {
      return { status: 200, body: await engine.purge({ ...body, by: actorOf(identity) }) };
    },
  });
}

/** Delete a finished task. */
function deleteRoute(engine: Engine): RouteSpec {
  return route({
    method: 'delete',
    path: '/api/tasks/:id',
    summary: 'Delete a finished task with its steps, log, signals and approvals',
    permission: 'delete',
    params: id,
    responses: { 200: 'the task as it was', 404: 'unknown id (or deleted already)', 409: 'not finished: cancel it first' },
    async handle({ identity, params }) {
      return { status: 200, body: { deleted: await engine.delete(params.id as string, { by: actorOf(identity) }) } };
    },
  });
}

/** A task with its steps, log and legal events. */
function getRoute(engine: Engine): RouteSpec {
  return route({
    method: 'get',
    path: '/api/tasks/:id',
    summary: 'A task with its steps and event log',
    permission: 'read',
    params: id,
    responses: { 200: 'the task', 404: 'unknown id' },
    async handle({ params }) {
      const [task, explanation] = await Promise.all([engine.get(params.id as string), engine.explain(params.id as string)]);
      return { status: 200, body: { ...task, legalEvents: explanation.legalEvents, summary: explanation.summary } };
    },
  });
}

/** Cancel a task. */
function cancelRoute(engine: Engine, limits: SummaryLimits): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/:id/cancel',
    summary: 'Cancel a task (a running one, or one whose last run left cleanup to do, is cancelling until its cleanup has run)',
    permission: 'operate',
    params: id,
    body: CancelBody,
    idempotency: 'replay',
    responses: { 200: 'the task after the command, summarized as in lists', 404: 'unknown id', 409: 'not legal from its status (legalEvents says what is)' },
    async handle({ identity, params, body }) {
      const task = await engine.cancel(params.id as string, { by: actorOf(identity), ...(body.reason ? { reason: body.reason } : {}) });
      return { status: 200, body: summarizeTask(task, limits.valueBytes).item };
    },
  });
}

/** Pause and resume (retry: `rerun.ts`). */
function commandRoutes(engine: Engine, limits: SummaryLimits): RouteSpec[] {
  return (['pause', 'resume'] as const).map((verb) =>
    route({
      method: 'post',
      path: `/api/tasks/:id/${verb}`,
      summary: `${verb[0]?.toUpperCase()}${verb.slice(1)} a task`,
      permission: 'operate',
      params: id,
      body: EmptyBody,
      idempotency: 'replay',
      responses: { 200: 'the task after the command, summarized as in lists', 404: 'unknown id', 409: 'not legal from its status (legalEvents says what is)' },
      async handle({ identity, params }) {
        return { status: 200, body: summarizeTask(await engine[verb](params.id as string, { by: actorOf(identity) }), limits.valueBytes).item };
      },
    }),
  );
}

/** Send an event to a state machine. */
function sendRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/:id/send/:event',
    summary: "Send an event to a state machine's task (taken only while its state takes it)",
    permission: 'operate',
    params: { ...id, event: EventName },
    body: SendBody,
    idempotency: 'engine',
    responses: {
      202: '{ created, state, delivered }',
      400: 'invalid payload',
      404: 'unknown id',
      409: 'refused (EVENT_REFUSED: legalEvents says what it takes now), or a reused key with another payload',
    },
    async handle({ identity, params, body, idempotencyKey }) {
      const key = keyOf(body, idempotencyKey);
      const res = await engine.send(params.id as string, params.event as string, body.payload, { by: actorOf(identity), ...(key !== undefined ? { idempotencyKey: key } : {}) });
      return { status: 202, body: res };
    },
  });
}

/** Send a signal. */
function signalRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/:id/signals/:name',
    summary: 'Send a signal (ctx.waitForEvent receives it)',
    permission: 'operate',
    params: { ...id, name: SignalName },
    body: SignalBody,
    idempotency: 'engine',
    responses: { 202: '{ created, delivered }', 400: 'invalid payload', 404: 'unknown id', 409: 'finished task, or reused key with another payload' },
    async handle({ identity, params, body, idempotencyKey }) {
      const key = keyOf(body, idempotencyKey);
      const res = await engine.signal(params.id as string, params.name as string, body.payload, {
        by: actorOf(identity),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
        ...(body.requireWaiting ? { requireWaiting: true } : {}),
      });
      return { status: 202, body: res };
    },
  });
}

export function taskRoutes(engine: Engine, limits: SummaryLimits): RouteSpec[] {
  return [
    startRoute(engine),
    batchRoute(engine),
    listRoute(engine, limits),
    purgeRoute(engine),
    deleteRoute(engine),
    getRoute(engine),
    cancelRoute(engine, limits),
    ...commandRoutes(engine, limits),
    sendRoute(engine),
    signalRoute(engine),
  ];
}
