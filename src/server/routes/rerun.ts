/**
 * @module server/routes/rerun
 * Running work again: retry a task (a failed one from where it failed, any finished one from a
 * named step or from its first drifted model call) and fork one from a step into a new task; and
 * the drift that tells which runs to re-run (recorded model calls the current code would make with
 * another request: `engine.drift`).
 */
import { z } from 'zod';
import type { Engine } from '../../index.ts';
import { queryFilter } from '../list-filter.ts';
import { Json, ListQuery, TaskId } from '../schemas.ts';
import { summarizeTask, type SummaryLimits } from '../summaries.ts';
import { actorOf } from './tasks.ts';
import { route, type RouteSpec } from './route.ts';

const StepId = z.string().min(1).max(300).describe("a step id of the task: `name`, or `name#2` for its second call; 'first-drift': the step of its first drifted model call (engine.drift)");

export const RetryBody = z
  .object({
    fromStep: StepId.optional().describe('run again from this step (required for a succeeded or cancelled task)'),
    compensate: z
      .boolean()
      .optional()
      .describe('with fromStep, for a succeeded task: run the compensations of the steps from there on first (newest first); they then run again under new idempotency keys'),
  })
  .strict();

export const ForkBody = z
  .object({
    fromStep: StepId.optional().describe('copy the calls before this step; it and the rest run anew (absent: run from the start)'),
    input: Json.optional().describe("the fork's input (absent: the source task's)"),
    tags: z.record(z.string(), z.string()).optional().describe("tags over the source's"),
    title: z.string().optional(),
  })
  .strict();

const id = { id: TaskId };

/** The task list's filters; a call replays at most 100 tasks (each in the server's process): page on with `cursor`. */
const DriftQuery = ListQuery.extend({ limit: z.coerce.number().int().min(1).max(100).optional() });

function retryRoute(engine: Engine, limits: SummaryLimits): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/:id/retry',
    summary: 'Run a task again: a failed one from the step that failed, or any finished one from fromStep (the steps from there on are forgotten)',
    permission: 'operate',
    params: id,
    body: RetryBody,
    idempotency: 'replay',
    responses: {
      200: 'the task after the command, summarized as in lists',
      400: "no such step, compensate without fromStep, or fromStep 'first-drift' for a workflow this server does not run",
      404: 'unknown id',
      409: "not legal from its status (legalEvents says what is), a succeeded or cancelled task without fromStep, compensate for a failed or cancelled task, or fromStep 'first-drift' and no drifted model call (or REPLAY_CHECK_FAILED: the code does not replay the task)",
    },
    async handle({ identity, params, body }) {
      const task = await engine.retry(params.id as string, {
        by: actorOf(identity),
        ...(body.fromStep !== undefined ? { fromStep: body.fromStep } : {}),
        ...(body.compensate !== undefined ? { compensate: body.compensate } : {}),
      });
      return { status: 200, body: summarizeTask(task, limits.valueBytes).item };
    },
  });
}

function forkRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/:id/fork',
    summary: "Fork a task from a step into a new task that reuses the journal before it (the source's input unless input is given)",
    permission: 'operate',
    params: id,
    body: ForkBody,
    idempotency: 'replay',
    responses: {
      201: '{ id, workflow, status, created }: the fork',
      400: 'no such step, or a bad input or tag',
      404: 'unknown id',
      409: "fromStep 'first-drift' and no drifted model call, or REPLAY_CHECK_FAILED",
    },
    async handle({ identity, params, body }) {
      const fork = await engine.fork(params.id as string, {
        by: actorOf(identity),
        ...(body.fromStep !== undefined ? { fromStep: body.fromStep } : {}),
        ...('input' in body ? { input: body.input } : {}),
        ...(body.tags !== undefined ? { tags: body.tags } : {}),
        ...(body.title !== undefined ? { title: body.title } : {}),
      });
      return { status: 201, body: fork };
    },
  });
}

function taskDriftRoute(engine: Engine): RouteSpec {
  return route({
    method: 'get',
    path: '/api/tasks/:id/drift',
    summary:
      "A task's recorded model calls that the current code would make with another request (prompt, model, tools or settings changed), found by replaying it without calling the model",
    permission: 'read',
    params: id,
    responses: {
      200: '{ taskId, workflow, firstDrift, drift: [{ step, model, recordedFingerprint, fingerprint }] }',
      400: 'a workflow this server does not run (serve its module)',
      404: 'unknown id',
      409: 'REPLAY_CHECK_FAILED: the current code does not replay the task (its message says where)',
    },
    async handle({ params }) {
      return { status: 200, body: await engine.drift(params.id as string) };
    },
  });
}

function driftRoute(engine: Engine): RouteSpec {
  return route({
    method: 'get',
    path: '/api/drift',
    summary:
      "The tasks of a filter (the task list's) whose recorded model calls the current code would make otherwise, each with its first drifted step; at most 100 tasks are replayed per call (limit), then nextCursor",
    permission: 'read',
    query: DriftQuery,
    responses: { 200: '{ drifted: [{ taskId, workflow, firstDrift, drift }], checked, unreplayable: [{ taskId, workflow, reason }], nextCursor }', 400: 'bad filter' },
    async handle({ query }) {
      return { status: 200, body: await engine.drift({ ...queryFilter(query), ...(query.limit !== undefined ? { limit: query.limit } : {}) }) };
    },
  });
}

export function rerunRoutes(engine: Engine, limits: SummaryLimits): RouteSpec[] {
  return [retryRoute(engine, limits), forkRoute(engine), taskDriftRoute(engine), driftRoute(engine)];
}
