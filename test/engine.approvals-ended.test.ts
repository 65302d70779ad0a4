// Approvals of tasks that end before anyone decides: a cancelled, failed or retried task's open
// approval leaves the reviewers' queue at once and is closed as `expired` (outcome `taskEnded`)
// with an audit entry; a retried task asks again with a new approval.
// An engine suite: it runs on SQLite and, in the engine-on-postgres project, on PostgreSQL.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isStepwiseError, workflow, type ApprovalInfo, type Engine } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const pendingIds = async (engine: Engine, taskId: string): Promise<string[]> => (await engine.approvals({ status: ['pending', 'escalated'], taskId })).map((a) => a.id);

async function firstApproval(engine: Engine, taskId: string): Promise<ApprovalInfo> {
  await eventually(async () => (await engine.get(taskId)).approvals.length > 0, 10_000, 'an approval');
  return (await engine.get(taskId)).approvals[0] as ApprovalInfo;
}

describe('approvals of ended tasks', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('a cancelled task leaves the pending queue at once, and a worker then closes its approval as expired with a task-ended entry', async () => {
    const wf = workflow('cancelled-review', async (ctx) => ctx.approval('review', { approvers: ['alice'] }));
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const approval = await firstApproval(engine, id);
    expect(await pendingIds(engine, id)).toEqual([approval.id]);
    expect((await engine.approvals({ status: 'pending', approver: 'alice' })).map((a) => a.id)).toContain(approval.id);
    // No worker runs while the task is cancelled: the record is still open, yet the queue no longer lists it.
    await worker.stop();
    await engine.cancel(id, { reason: 'not needed' });
    expect((await engine.get(id)).approvals[0]?.status).toBe('pending');
    expect(await pendingIds(engine, id)).toEqual([]);
    expect((await engine.approvals({ status: 'pending', approver: 'alice' })).map((a) => a.id)).not.toContain(approval.id);
    // The next worker closes it.
    await startWorker(engine);
    await eventually(async () => (await engine.get(id)).approvals[0]?.status === 'expired', 10_000, 'the approval closed');
    const info = await engine.get(id);
    expect(info.approvals[0]).toMatchObject({ status: 'expired', decisions: [], outcome: { approved: false, by: null, timedOut: false, taskEnded: 'cancelled' } });
    expect(info.approvals[0]?.decidedAt).not.toBeNull();
    const closed = info.history.filter((e) => e.type === 'approval:decided');
    expect(closed).toMatchObject([{ actor: { kind: 'system', id: 'task-ended' }, approvalId: approval.id, detail: { status: 'expired' } }]);
    expect((await engine.approvals({ status: 'expired', taskId: id })).map((a) => a.id)).toEqual([approval.id]);
    const refused = await engine.decide(approval.id, { approve: true, by: 'alice' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isStepwiseError(refused, ERROR_CODES.TASK_ENDED)).toBe(true);
  });

  it('a task failed while awaiting an approval and then retried asks again: the old approval closed, a new one decides the task', async () => {
    const clock = new ManualClock();
    const wf = workflow('retried-review', async (ctx) => (await ctx.approval('review', { approvers: ['alice'] })).approved, {
      dwell: { waiting: { after: '1h', then: 'fail' } },
    });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const first = await firstApproval(engine, id);
    await clock.advance('1h');
    for (let i = 0; i < 200 && (await engine.get(id)).status !== 'failed'; i++) {
      await clock.advance('1s');
      await new Promise((r) => setTimeout(r, 5));
    }
    await waitForStatus(engine, id, 'failed');
    await eventually(async () => (await engine.get(id)).approvals[0]?.status === 'expired', 10_000, 'the first approval closed');
    expect((await engine.get(id)).approvals[0]?.outcome).toMatchObject({ taskEnded: 'failed' });
    await engine.retry(id);
    await eventually(async () => (await pendingIds(engine, id)).length === 1, 10_000, 'a new pending approval');
    const [second] = await pendingIds(engine, id);
    expect(second).not.toBe(first.id);
    await waitForStatus(engine, id, 'waiting');
    await engine.decide(second as string, { approve: true, by: 'alice' });
    expect(await engine.result(id, { timeout: '20s' })).toBe(true);
    const approvals = (await engine.get(id)).approvals;
    expect(approvals.map((a) => [a.id, a.status])).toEqual([
      [first.id, 'expired'],
      [second, 'approved'],
    ]);
  });
});
