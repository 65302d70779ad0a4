/**
 * @module server/routes/approvals
 * Approvals: the list (`GET /api/approvals`, over `engine.approvals(query)`) and a decision
 * (`POST /api/approvals/:id/decide`, over `engine.decide(id, options)`). The decision's `by` is
 * the authenticated identity, never the body; whether that identity may decide (the approval's
 * approver list) is the engine's FORBIDDEN to give, an unknown approval its NOT_FOUND and a task
 * that has ended its TASK_ENDED, each answered through the HTTP status table.
 */
import { InvalidArgumentError, type ApprovalsQuery as EngineApprovalsQuery, type Engine } from '../../index.ts';
import { ApprovalId, ApprovalsQuery, DecideBody } from '../schemas.ts';
import { summarizeApproval, type SummaryLimits } from '../summaries.ts';
import { route, type RouteSpec } from './route.ts';

export function approvalRoutes(engine: Engine, limits: SummaryLimits): RouteSpec[] {
  return [
    route({
      method: 'get',
      path: '/api/approvals',
      summary: 'Approvals, by status, approver, workflow or task (oldest first)',
      permission: 'read',
      query: ApprovalsQuery,
      responses: { 200: '{ approvals }: payloads and decisions over the summary limit cut, named in `truncated` (`url`: the task, with them whole)', 400: 'bad filter' },
      async handle({ identity, query }) {
        if (query.mine === 'true' && query.approver !== undefined && query.approver !== identity.name) {
          throw new InvalidArgumentError('Give either mine=true or approver, not both.');
        }
        const approver = query.mine === 'true' ? identity.name : query.approver;
        const filter: EngineApprovalsQuery = {
          ...(query.status !== undefined ? { status: query.status } : {}),
          ...(approver !== undefined ? { approver } : {}),
          // The caller's own queue includes the approvals listing its role.
          ...(query.mine === 'true' ? { roles: [identity.role] } : {}),
          ...(query.workflow !== undefined ? { workflow: query.workflow } : {}),
          ...(query.taskId !== undefined ? { taskId: query.taskId } : {}),
          ...(query.limit !== undefined ? { limit: query.limit } : {}),
        };
        const approvals = await engine.approvals(filter);
        return { status: 200, body: { approvals: approvals.map((a) => summarizeApproval(a, limits.valueBytes)) } };
      },
    }),
    route({
      method: 'post',
      path: '/api/approvals/:id/decide',
      summary: 'Approve or reject (the decider is the authenticated identity)',
      permission: 'decide',
      params: { id: ApprovalId },
      body: DecideBody,
      idempotency: 'engine',
      responses: { 200: 'the approval after the decision', 403: 'not an approver of it, or it expired', 404: 'unknown approval', 409: 'decided otherwise already, or the task has ended' },
      async handle({ identity, params, body, idempotencyKey }) {
        const approval = await engine.decide(params.id as string, {
          approve: body.approve,
          by: identity.name,
          roles: [identity.role],
          ...(body.comment !== undefined ? { comment: body.comment } : {}),
          ...(body.data !== undefined ? { data: body.data } : {}),
          ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        });
        return { status: 200, body: approval };
      },
    }),
  ];
}
