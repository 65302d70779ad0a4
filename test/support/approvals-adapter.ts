// The approvals API the server plugs into (`engine.approvals(filter)`, `engine.decide(id, decision)`),
// implemented for the tests over signals until the approvals capability is merged: a `review` task
// waiting for its `approval` event is a pending approval (decided by alice only); a decision is the
// signal, sent as the decider. The server and dashboard are exercised exactly as they will be
// with the real capability.
import { ConflictError, Engine, ForbiddenError, TaskNotFoundError, type EngineOptions } from '../../src/index.ts';
import type { ApprovalsFilter, ApprovalView, Decision } from '../../src/server/index.ts';

export class EngineWithApprovals extends Engine {
  readonly approvers: readonly string[];
  constructor(options: EngineOptions, approvers: readonly string[] = ['alice']) {
    super(options);
    this.approvers = approvers;
  }

  async approvals(filter: ApprovalsFilter = {}): Promise<ApprovalView[]> {
    const tasks = filter.taskId ? [await this.get(filter.taskId)] : await Promise.all((await this.list({ workflow: 'review', limit: 200 })).tasks.map((t) => this.get(t.id)));
    const out: ApprovalView[] = [];
    for (const t of tasks) {
      if (t.workflow !== 'review') continue;
      const signal = t.history.find((e) => e.type === 'signal:received' && e.name === 'approval');
      const waiting = t.status === 'waiting' && t.wait?.kind === 'event';
      if (!signal && !waiting) continue;
      const payload = signal?.type === 'signal:received' ? (signal.payload as { approve: boolean }) : null;
      const draft = t.steps.find((s) => s.name === 'draft')?.output;
      const view: ApprovalView = { id: t.id, taskId: t.id, workflow: t.workflow, step: 'approval', status: payload ? (payload.approve ? 'approved' : 'rejected') : 'pending', approvers: this.approvers, data: draft };
      if (filter.status && view.status !== filter.status) continue;
      if (filter.approver && !this.approvers.includes(filter.approver)) continue;
      out.push(view);
    }
    return out;
  }

  async decide(approvalId: string, d: Decision): Promise<ApprovalView> {
    const [view] = await this.approvals({ taskId: approvalId }).catch(() => [] as ApprovalView[]);
    if (!view) throw new TaskNotFoundError(approvalId);
    if (!this.approvers.includes(d.by)) throw new ForbiddenError(`${d.by} is not an approver of ${approvalId} (approvers: ${this.approvers.join(', ')}).`, { actor: d.by });
    if (view.status !== 'pending') throw new ConflictError(`Approval ${approvalId} is already ${view.status}.`, { recorded: view.status });
    await this.signal(view.taskId, 'approval', { approve: d.approve, ...(d.data !== undefined ? { data: d.data } : {}) }, { by: d.by, ...(d.idempotencyKey ? { idempotencyKey: d.idempotencyKey } : {}) });
    return { ...view, status: d.approve ? 'approved' : 'rejected' };
  }
}
