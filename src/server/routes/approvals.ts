/**
 * @module server/routes/approvals
 * Approvals: the list (`GET /api/approvals`) and a decision (`POST /api/approvals/:id/decide`).
 * Written against {@link ApprovalsApi}, the engine methods the approvals capability adds
 * (`engine.approvals(filter)`, `engine.decide(id, decision)`); `app.ts` mounts these routes only
 * when the engine has both. The decision's `by` is the authenticated identity, never the body;
 * whether that identity may decide (an approver list) is the engine's FORBIDDEN to give.
 */
import { InvalidArgumentError } from '../../index.ts';
import { ApprovalId, ApprovalsQuery, DecideBody } from '../schemas.ts';
import { route, type RouteSpec } from './route.ts';

/** The shape of an approval as the routes and the dashboard read it (the engine's ApprovalInfo has at least these). */
export interface ApprovalView {
  id: string;
  taskId: string;
  workflow?: string;
  status: string;
  approvers?: readonly string[];
  step?: string;
  [field: string]: unknown;
}

export interface ApprovalsFilter {
  status?: string;
  approver?: string;
  workflow?: string;
  taskId?: string;
}

export interface Decision {
  approve: boolean;
  by: string;
  comment?: string;
  data?: unknown;
  idempotencyKey?: string;
}

/** What the approvals capability adds to the engine. */
export interface ApprovalsApi {
  approvals(filter?: ApprovalsFilter): Promise<ApprovalView[]>;
  decide(approvalId: string, decision: Decision): Promise<ApprovalView>;
}

/** The engine's approvals methods, when it has them. */
export function approvalsOf(engine: object): ApprovalsApi | null {
  const e = engine as Partial<ApprovalsApi>;
  if (typeof e.approvals !== 'function' || typeof e.decide !== 'function') return null;
  return { approvals: (f) => e.approvals!.call(engine, f), decide: (id, d) => e.decide!.call(engine, id, d) };
}

export function approvalRoutes(api: ApprovalsApi): RouteSpec[] {
  return [
    route({
      method: 'get', path: '/api/approvals', summary: 'Approvals, by status, approver, workflow or task', permission: 'read', query: ApprovalsQuery,
      responses: { 200: '{ approvals }', 400: 'bad filter' },
      async handle({ identity, query }) {
        if (query.mine === 'true' && query.approver !== undefined && query.approver !== identity.name) {
          throw new InvalidArgumentError('Give either mine=true or approver, not both.');
        }
        const approver = query.mine === 'true' ? identity.name : query.approver;
        const approvals = await api.approvals({
          ...(query.status !== undefined ? { status: query.status } : {}),
          ...(approver !== undefined ? { approver } : {}),
          ...(query.workflow !== undefined ? { workflow: query.workflow } : {}),
          ...(query.taskId !== undefined ? { taskId: query.taskId } : {}),
        });
        return { status: 200, body: { approvals } };
      },
    }),
    route({
      method: 'post', path: '/api/approvals/:id/decide', summary: 'Approve or reject (the decider is the authenticated identity)', permission: 'decide',
      params: { id: ApprovalId }, body: DecideBody, idempotency: 'engine',
      responses: { 200: 'the approval after the decision', 403: 'not an approver of it', 404: 'unknown approval', 409: 'already decided otherwise' },
      async handle({ identity, params, body, idempotencyKey }) {
        const approval = await api.decide(params.id as string, {
          approve: body.approve, by: identity.name,
          ...(body.comment !== undefined ? { comment: body.comment } : {}),
          ...(body.data !== undefined ? { data: body.data } : {}),
          ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        });
        return { status: 200, body: approval };
      },
    }),
  ];
}
