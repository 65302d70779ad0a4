/**
 * @module server/routes/rerun
 * Running work again: retry a task (a failed one from where it failed, any finished one from a
 * named step) and fork one from a step into a new task.
 */
import { z } from 'zod';
import type { Engine } from '../../index.ts';
import { Json, TaskId } from '../schemas.ts';
import { summarizeTask, type SummaryLimits } from '../summaries.ts';
import { actorOf } from './tasks.ts';
import { route, type RouteSpec } from './route.ts';

const StepId = z.string().min(1).max(300).describe('a step id of the task: `name`, or `name#2` for its second call');

export const RetryBody = z.object({ fromStep: StepId.optional().describe('run again from this step (required for a succeeded or cancelled task)') }).strict();

export const ForkBody = z
  .object({
    fromStep: StepId.optional().describe('copy the calls before this step; it and the rest run anew (absent: run from the start)'),
    input: Json.optional().describe("the fork's input (absent: the source task's)"),
    tags: z.record(z.string(), z.string()).optional().describe("tags over the source's"),
    title: z.string().optional(),
  })
  .strict();

const id = { id: TaskId };

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
      400: 'no such step',
      404: 'unknown id',
      409: 'not legal from its status (legalEvents says what is), or a succeeded or cancelled task without fromStep',
    },
    async handle({ identity, params, body }) {
      const task = await engine.retry(params.id as string, { by: actorOf(identity), ...(body.fromStep !== undefined ? { fromStep: body.fromStep } : {}) });
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
    responses: { 201: '{ id, workflow, status, created }: the fork', 400: 'no such step, or a bad input or tag', 404: 'unknown id' },
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

export function rerunRoutes(engine: Engine, limits: SummaryLimits): RouteSpec[] {
  return [retryRoute(engine, limits), forkRoute(engine)];
}
