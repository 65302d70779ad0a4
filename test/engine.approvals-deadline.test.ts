// An approval's deadline at decision time: a decision that arrives after the deadline, before any
// worker applied the timeout policy, gets what the policy gives, decided in the write's
// transaction by the store's clock. An engine suite: it runs on SQLite and, in the
// engine-on-postgres project, on PostgreSQL (there also with the engine's clock behind the
// database's).
import { describe, expect, it } from 'vitest';
import { ApprovalExpiredError, ERROR_CODES, isStepwiseError, workflow, type ApprovalEvent, type ApprovalInfo, type ApprovalNotice, type Engine, type TaskEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const approvalEvents = (history: TaskEvent[]): ApprovalEvent[] => history.filter((e): e is ApprovalEvent => e.type.startsWith('approval:'));

async function approvalOf(engine: Engine, taskId: string): Promise<ApprovalInfo> {
  let found: ApprovalInfo | undefined;
  await eventually(
    async () => {
      found = (await engine.get(taskId)).approvals[0];
      return found !== undefined;
    },
    10_000,
    `an approval of task ${taskId}`,
  );
  return found as ApprovalInfo;
}

async function refusal(p: Promise<unknown>): Promise<Error> {
  const e = await p.then(
    () => null,
    (err: unknown) => err as Error,
  );
  expect(e, 'expected the decision to be refused').not.toBeNull();
  return e as Error;
}

/** Starts the workflow, waits until its task parks on the approval, and stops the worker so no run applies the deadline. */
async function parked(engine: Engine, name: string): Promise<{ id: string; approval: ApprovalInfo }> {
  const worker = await startWorker(engine);
  const { id } = await engine.start(name);
  const approval = await approvalOf(engine, id);
  await waitForStatus(engine, id, 'waiting');
  await worker.stop();
  return { id, approval };
}

describe('approval deadlines at decision time', () => {
  it("onTimeout 'reject': a decision after the deadline, before any worker looked, is refused (ApprovalExpiredError, FORBIDDEN) and the approval ends expired with the timed-out rejection", async () => {
    const clock = new ManualClock();
    const wf = workflow('late-reject', async (ctx) => ctx.approval('review', { approvers: ['alice'], timeout: '24h', onTimeout: 'reject' }));
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'late-reject');
    await clock.advance('24h');
    const e = await refusal(engine.decide(approval.id, { approve: true, by: 'alice' }));
    expect(isStepwiseError(e, ERROR_CODES.FORBIDDEN)).toBe(true);
    expect(e).toBeInstanceOf(ApprovalExpiredError);
    expect(e).toMatchObject({ approvalId: approval.id, outcome: 'rejected', deadline: approval.deadline?.getTime() });
    expect(e.message).toMatch(/after its deadline.*rejected it/);
    const info = await engine.get(id);
    expect(info.approvals[0]).toMatchObject({ status: 'expired', decisions: [], outcome: { approved: false, by: null, timedOut: true, escalations: 0 } });
    const events = approvalEvents(info.history);
    expect(events.map((x) => x.type)).toEqual(['approval:requested', 'approval:decided']);
    expect(events[1]?.actor).toEqual({ kind: 'system', id: 'approval-policy:reject' });
    // The same late click again gets the same answer; the task goes on with the timed-out outcome.
    expect(await refusal(engine.decide(approval.id, { approve: true, by: 'alice' }))).toBeInstanceOf(ApprovalExpiredError);
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: false, by: null, comment: null, data: null, timedOut: true, escalations: 0 });
  });

  it('a decision just before the deadline stands', async () => {
    const clock = new ManualClock();
    const wf = workflow('in-time', async (ctx) => ctx.approval('review', { approvers: ['alice'], timeout: '24h', onTimeout: 'reject' }));
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'in-time');
    await clock.advance(86_400_000 - 1);
    expect(await engine.decide(approval.id, { approve: true, by: 'alice' })).toMatchObject({ status: 'approved', level: 1 });
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: true, by: 'alice', timedOut: false });
  });

  it("onTimeout 'approve': after the deadline a late approval concurs with the policy's and a late rejection is refused saying the policy approved it", async () => {
    const clock = new ManualClock();
    const wf = workflow('late-auto-approve', async (ctx) => ctx.approval('low-risk', { approvers: ['alice', 'bob'], timeout: '2h', onTimeout: 'approve' }));
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'late-auto-approve');
    await clock.advance('2h');
    const e = await refusal(engine.decide(approval.id, { approve: false, by: 'bob' }));
    expect(e).toMatchObject({ code: ERROR_CODES.FORBIDDEN, name: 'ApprovalExpiredError', outcome: 'approved' });
    expect(await engine.decide(approval.id, { approve: true, by: 'alice' })).toMatchObject({ status: 'approved', decisions: [], outcome: { approved: true, by: null, timedOut: true } });
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: true, by: null, timedOut: true });
  });

  it('escalation: after the first deadline, before any worker escalated, the escalation target decides at once, at level 2, in the write that escalates', async () => {
    const clock = new ManualClock();
    const notices: ApprovalNotice[] = [];
    const wf = workflow('late-escalate', async (ctx) => ctx.approval('spend', { approvers: ['alice'], timeout: '1h', onTimeout: { escalate: ['carol'], timeout: '1h' } }));
    const engine = makeEngine({ workflows: [wf], clock, observers: [{ onApproval: (n) => void notices.push(n) }] });
    const { id, approval } = await parked(engine, 'late-escalate');
    await clock.advance('1h');
    const decided = await engine.decide(approval.id, { approve: true, by: 'carol', comment: 'covering for alice' });
    expect(decided).toMatchObject({ status: 'approved', level: 2, approvers: ['alice', 'carol'], outcome: { approved: true, by: 'carol', timedOut: false, escalations: 1 } });
    const events = approvalEvents((await engine.get(id)).history);
    expect(events.map((x) => x.type)).toEqual(['approval:requested', 'approval:escalated', 'approval:decision', 'approval:decided']);
    expect(events[1]).toMatchObject({ actor: { kind: 'system', id: 'approval-policy:escalate' }, detail: { level: 2, added: ['carol'] } });
    expect(notices.map((n) => n.kind)).toEqual(['requested', 'escalated', 'decided']);
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: true, by: 'carol', comment: 'covering for alice', data: null, timedOut: false, escalations: 1 });
  });

  it('escalation: a decider the next level does not list is FORBIDDEN after the deadline, and the escalation it found is recorded', async () => {
    const clock = new ManualClock();
    const wf = workflow('late-escalate-forbidden', async (ctx) => ctx.approval('spend', { approvers: ['alice'], timeout: '1h', onTimeout: { escalate: ['carol'], timeout: '1h' } }));
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'late-escalate-forbidden');
    await clock.advance('1h');
    const e = await refusal(engine.decide(approval.id, { approve: true, by: 'mallory' }));
    expect(e).toMatchObject({ code: ERROR_CODES.FORBIDDEN, name: 'ForbiddenError' });
    expect(e.message).toMatch(/level 2: its approvers are alice, carol/);
    expect((await engine.get(id)).approvals[0]).toMatchObject({ status: 'escalated', level: 2, decisions: [] });
  });

  it('every deadline that passed applies in order: a three-level chain past its last deadline is refused as expired, with both escalations recorded', async () => {
    const clock = new ManualClock();
    const wf = workflow('late-chain', async (ctx) =>
      ctx.approval('spend', { approvers: ['alice'], timeout: '24h', onTimeout: { escalate: ['carol'], timeout: '4h', then: { escalate: ['dave'], timeout: '1h', then: 'reject' } } }),
    );
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'late-chain');
    await clock.advance('29h');
    expect(await refusal(engine.decide(approval.id, { approve: true, by: 'dave' }))).toMatchObject({ name: 'ApprovalExpiredError', outcome: 'rejected' });
    const info = await engine.get(id);
    expect(info.approvals[0]).toMatchObject({ status: 'expired', level: 3, approvers: ['alice', 'carol', 'dave'], outcome: { approved: false, timedOut: true, escalations: 2 } });
    expect(approvalEvents(info.history).map((x) => x.type)).toEqual(['approval:requested', 'approval:escalated', 'approval:escalated', 'approval:decided']);
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: false, by: null, comment: null, data: null, timedOut: true, escalations: 2 });
  });

  it.skipIf(TEST_STORE !== 'postgres')("PostgreSQL: with the engine's clock behind the database's, the deadline is judged by the database's clock", async () => {
    // The engine's clock runs three hours behind the database: by it, the 1-hour deadline is two hours away.
    const clock = new ManualClock(Date.now() - 3 * 3_600_000);
    const wf = workflow('behind-clock', async (ctx) => ctx.approval('review', { approvers: ['alice'], timeout: '1h', onTimeout: 'reject' }));
    const engine = makeEngine({ workflows: [wf], clock });
    const { id, approval } = await parked(engine, 'behind-clock');
    expect(clock.now()).toBeLessThan(approval.deadline?.getTime() as number);
    const before = Date.now();
    expect(await refusal(engine.decide(approval.id, { approve: true, by: 'alice' }))).toMatchObject({ name: 'ApprovalExpiredError', outcome: 'rejected' });
    const closed = (await engine.get(id)).approvals[0];
    expect(closed).toMatchObject({ status: 'expired', decisions: [], outcome: { timedOut: true } });
    // Decided at the database's time, not the engine's.
    expect(closed?.decidedAt?.getTime()).toBeGreaterThanOrEqual(before - 60_000);
    // The task, due by the engine's clock only in two hours, was made due by the decision's write.
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: false, by: null, comment: null, data: null, timedOut: true, escalations: 0 });
  });
});
