/**
 * @module server/routes/bulk
 * `POST /api/tasks/bulk`: one command on every task a filter matches (`engine.bulk`), or with
 * `dryRun` the count of what it would take. The operate right, and for `delete` the delete right
 * too; each task's log names the caller as for a single command.
 */
import { z } from 'zod';
import { ALL_STATUSES, BULK_ACTIONS, type Engine, type TaskStatus } from '../../index.ts';
import { requirePermission } from '../middleware.ts';
import { WorkflowName, TaskId } from '../schemas.ts';
import { actorOf } from './tasks.ts';
import { route, type RouteSpec } from './route.ts';
import { listFilter } from '../list-filter.ts';

const Time = z.union([z.number().int(), z.string().regex(/^\d{4}-\d{2}-\d{2}/, 'ms since the epoch or an ISO date')]);

export const BulkFilter = z
  .object({
    status: z.union([z.enum(ALL_STATUSES as unknown as [TaskStatus, ...TaskStatus[]]), z.array(z.enum(ALL_STATUSES as unknown as [TaskStatus, ...TaskStatus[]])).min(1)]).optional(),
    workflow: WorkflowName.optional(),
    parent: TaskId.optional(),
    tags: z.record(z.string(), z.string()).optional(),
    createdAfter: Time.optional(),
    createdBefore: Time.optional(),
    failedWith: z.string().min(1).max(200).optional(),
    text: z.string().min(1).max(200).optional(),
  })
  .strict();

export const BulkBody = z
  .object({
    action: z.enum(BULK_ACTIONS),
    filter: BulkFilter.describe('a filter of GET /api/tasks, as JSON ({} for every task)'),
    dryRun: z.boolean().optional().describe('count what the action would take, change nothing'),
    limit: z.number().int().min(1).max(1_000_000).optional().describe('act on at most this many tasks (default 10,000)'),
    reason: z.string().max(1000).optional().describe('cancel: the reason recorded on each task'),
    fromStep: z.string().min(1).max(300).optional().describe('retry: the step each task runs again from'),
    compensate: z.boolean().optional().describe('retry with fromStep: undo each succeeded task from there on first (other statuses are skipped)'),
  })
  .strict();

export function bulkRoute(engine: Engine): RouteSpec {
  return route({
    method: 'post',
    path: '/api/tasks/bulk',
    summary: 'Cancel, retry, pause, resume or delete every task a filter matches (dryRun: count them)',
    permission: 'operate',
    body: BulkBody,
    responses: {
      200: '{ action, dryRun, matched, acted, skipped, skippedCount, failed, failedCount, truncated }',
      400: 'a bad filter or option',
      403: 'the role may not operate (delete: may not delete)',
    },
    async handle({ identity, body }) {
      if (body.action === 'delete') requirePermission(identity, 'delete');
      const result = await engine.bulk({
        action: body.action,
        filter: listFilter(body.filter),
        by: actorOf(identity),
        ...(body.dryRun !== undefined ? { dryRun: body.dryRun } : {}),
        ...(body.limit !== undefined ? { limit: body.limit } : {}),
        ...(body.reason !== undefined ? { reason: body.reason } : {}),
        ...(body.fromStep !== undefined ? { fromStep: body.fromStep } : {}),
        ...(body.compensate !== undefined ? { compensate: body.compensate } : {}),
      });
      return { status: 200, body: result };
    },
  });
}
