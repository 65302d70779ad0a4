// Approval points (ctx.approval, engine.decide, engine.approvals): parked tasks, idempotent and
// authorised decisions, timeout policies, escalation, reminders, quorum and the `requires` guard.
// An engine suite: it runs on SQLite and, in the engine-on-postgres project, on PostgreSQL.
import { describe, expect, it } from 'vitest';
import {
  ApprovalNotFoundError,
  ConflictError,
  ERROR_CODES,
  ForbiddenError,
  InvalidArgumentError,
  TaskEndedError,
  isStepwiseError,
  workflow,
  type ApprovalDecision,
  type ApprovalEvent,
  type ApprovalInfo,
  type ApprovalNotice,
  type Engine,
  type TaskEvent,
} from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const approvalEvents = (history: TaskEvent[]): ApprovalEvent[] => history.filter((e): e is ApprovalEvent => e.type.startsWith('approval:'));

/** The task's only approval once it exists. */
async function approvalOf(engine: Engine, taskId: string, name?: string): Promise<ApprovalInfo> {
  let found: ApprovalInfo | undefined;
  await eventually(
    async () => {
      const list = (await engine.get(taskId)).approvals.filter((a) => name === undefined || a.name === name);
      found = list[list.length - 1];
      return found !== undefined;
    },
    10_000,
    `an approval of task ${taskId}`,
  );
  return found as ApprovalInfo;
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<Error> {
  const e = await p.then(
    () => null,
    (err: unknown) => err as Error,
  );
  expect(e, `expected a rejection with ${code}`).not.toBeNull();
  expect(isStepwiseError(e, code as never), `got ${String((e as Error)?.message)}`).toBe(true);
  return e as Error;
}

describe('approvals', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('parks the task on an approval (waiting, no worker slot) and resumes it with the decision and the edited draft', async () => {
    const published: unknown[] = [];
    const wf = workflow('review-draft', async (ctx) => {
      const draft = await ctx.step('draft', () => ({ text: 'v1' }));
      const review = await ctx.approval('review', { payload: draft, approvers: ['alice', 'bob'] });
      const final = (review.data ?? draft) as { text: string };
      await ctx.step('publish', () => void published.push(final.text));
      return review;
    });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    await waitForStatus(engine, id, 'waiting');
    const parked = await engine.get(id);
    expect(worker.inFlight).toBe(0);
    expect(parked.lease).toBeNull();
    expect(parked.wait).toMatchObject({ kind: 'approval', approval: approval.id, name: 'review', approvers: ['alice', 'bob'] });
    expect(approval).toMatchObject({
      taskId: id,
      workflow: 'review-draft',
      name: 'review',
      status: 'pending',
      approvers: ['alice', 'bob'],
      quorum: 1,
      payload: { text: 'v1' },
      level: 1,
      decisions: [],
      deadline: null,
    });
    expect((await engine.approvals({ status: 'pending', approver: 'bob' })).map((a) => a.id)).toEqual([approval.id]);
    expect(await engine.approvals({ status: 'pending', approver: 'carol' })).toEqual([]);
    expect((await engine.approvals({ workflow: 'review-draft' })).map((a) => a.id)).toEqual([approval.id]);
    expect((await engine.explain(id)).summary).toMatch(
      new RegExp(`approval "review" \\(${approval.id}, level 1\\) from alice, bob \\(no deadline\\); decide with \`stepwise approve ${approval.id}`),
    );

    const decided = await engine.decide(approval.id, { approve: true, by: 'bob', comment: 'tightened the intro', data: { text: 'v2' } });
    expect(decided).toMatchObject({ status: 'approved', outcome: { approved: true, by: 'bob', comment: 'tightened the intro', data: { text: 'v2' }, timedOut: false, escalations: 0 } });
    expect(decided.decisions).toMatchObject([{ by: 'bob', approve: true, comment: 'tightened the intro', data: { text: 'v2' }, idempotencyKey: null }]);
    const result = (await engine.result(id, { timeout: '20s' })) as ApprovalDecision;
    expect(result).toEqual({ approved: true, by: 'bob', comment: 'tightened the intro', data: { text: 'v2' }, timedOut: false, escalations: 0 });
    expect(published).toEqual(['v2']);
    const info = await engine.get(id);
    expect(approvalEvents(info.history).map((e) => [e.type, e.actor.kind, e.actor.kind === 'user' ? e.actor.id : '', e.approvalId])).toEqual([
      ['approval:requested', 'worker', '', approval.id],
      ['approval:decision', 'user', 'bob', approval.id],
      ['approval:decided', 'user', 'bob', approval.id],
    ]);
    expect(info.approvals[0]?.status).toBe('approved');
  });

  it('the same decision sent again (a double click, a retried call, a repeat with its key) returns the first result and changes nothing', async () => {
    const wf = workflow('double-click', async (ctx) => ctx.approval('review', { approvers: ['alice'] }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    const clicks = await Promise.all(Array.from({ length: 5 }, () => engine.decide(approval.id, { approve: true, by: 'alice', idempotencyKey: 'click-1' })));
    for (const c of clicks) expect(c).toEqual(clicks[0]);
    const again = await engine.decide(approval.id, { approve: true, by: 'alice' });
    expect(again).toEqual(clicks[0]);
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: true, by: 'alice' });
    const after = await engine.decide(approval.id, { approve: true, by: 'alice', idempotencyKey: 'click-1' });
    expect(after.decisions).toHaveLength(1);
    expect(approvalEvents((await engine.get(id)).history).filter((e) => e.type === 'approval:decision')).toHaveLength(1);
  });

  it('a contrary decision after one was recorded is a CONFLICT naming the recorded decision', async () => {
    const wf = workflow('contrary', async (ctx) => ctx.approval('review', { approvers: ['alice', 'bob'] }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    await engine.decide(approval.id, { approve: false, by: 'alice', comment: 'wrong numbers', idempotencyKey: 'k1' });
    const mine = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'alice' }), ERROR_CODES.CONFLICT);
    expect(mine).toBeInstanceOf(ConflictError);
    expect(mine.message).toMatch(/alice rejected it at .* \("wrong numbers"\)/);
    const key = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'bob', idempotencyKey: 'k1' }), ERROR_CODES.CONFLICT);
    expect(key.message).toMatch(/Key "k1" .* alice rejected it/);
    const other = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'bob' }), ERROR_CODES.CONFLICT);
    expect(other.message).toMatch(/already rejected by alice/);
    expect((other as ConflictError).recorded).toMatchObject({ approved: false, by: 'alice' });
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: false, by: 'alice', comment: 'wrong numbers' });
  });

  it('refuses a decision by someone not listed (FORBIDDEN), on an unknown id (NOT_FOUND), and for a cancelled task (TASK_ENDED)', async () => {
    const wf = workflow('guarded-review', async (ctx) => ctx.approval('review', { approvers: ['alice'] }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    await waitForStatus(engine, id, 'waiting');
    const forbidden = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'mallory' }), ERROR_CODES.FORBIDDEN);
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect(forbidden.message).toMatch(/mallory may not decide .* approvers are alice/);
    expect(await rejectsWith(engine.decide('apv_nope', { approve: true, by: 'alice' }), ERROR_CODES.NOT_FOUND)).toBeInstanceOf(ApprovalNotFoundError);
    await rejectsWith(engine.decide(approval.id, { approve: 'yes' as never, by: 'alice' }), ERROR_CODES.INVALID_ARGUMENT);
    await engine.cancel(id, { reason: 'no longer needed' });
    const ended = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'alice' }), ERROR_CODES.TASK_ENDED);
    expect(ended).toBeInstanceOf(TaskEndedError);
    expect(ended.message).toMatch(/is cancelled/);
    // The record is closed (not decided): expired, saying the task ended.
    await eventually(async () => (await engine.get(id)).approvals[0]?.status === 'expired', 10_000, 'the approval closed');
    expect((await engine.get(id)).approvals[0]).toMatchObject({ status: 'expired', decisions: [], outcome: { approved: false, taskEnded: 'cancelled' } });
  });

  it('a decision names one approval: a repeated click on the review of draft 1 never decides the review of draft 2', async () => {
    const wf = workflow('two-drafts', async (ctx) => {
      const decisions: ApprovalDecision[] = [];
      for (let draft = 1; draft <= 2; draft++) {
        const d = await ctx.approval('review', { payload: { draft }, approvers: ['alice'] });
        decisions.push(d);
        if (d.approved) break;
      }
      return decisions.map((d) => d.approved);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const first = await approvalOf(engine, id);
    await engine.decide(first.id, { approve: false, by: 'alice', idempotencyKey: 'click' });
    await eventually(async () => (await engine.get(id)).approvals.length === 2, 10_000, 'the review of draft 2');
    const second = (await engine.get(id)).approvals[1] as ApprovalInfo;
    expect(second.payload).toEqual({ draft: 2 });
    // The buffered second click of the first review arrives now.
    const repeat = await engine.decide(first.id, { approve: false, by: 'alice', idempotencyKey: 'click' });
    expect(repeat.id).toBe(first.id);
    expect((await engine.get(id)).approvals[1]).toMatchObject({ id: second.id, status: 'pending', decisions: [] });
    await engine.decide(second.id, { approve: true, by: 'alice' });
    expect(await engine.result(id, { timeout: '20s' })).toEqual([false, true]);
  });

  it("refuses signals under the approvals' reserved names, so that no signal can pose as a decision", async () => {
    const wf = workflow('forge', async (ctx) => ctx.approval('review'));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    const e = await rejectsWith(engine.signal(id, `approval:${approval.id}`), ERROR_CODES.INVALID_ARGUMENT);
    expect(e).toBeInstanceOf(InvalidArgumentError);
    expect((await engine.get(id)).approvals[0]?.status).toBe('pending');
  });

  it("onTimeout 'reject': a 24-hour timeout on the engine clock expires the approval, the workflow gets a timed-out rejection, and a later decision is FORBIDDEN", async () => {
    const clock = new ManualClock();
    const wf = workflow('day-timeout', async (ctx) => ctx.approval('review', { approvers: ['alice'], timeout: '24h', onTimeout: 'reject' }));
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await approvalOf(engine, id);
    expect(approval.deadline?.getTime()).toBe(approval.createdAt.getTime() + 86_400_000);
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.get(id)).runAt).toBe(approval.createdAt.getTime() + 86_400_000);
    await clock.advance('24h');
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: false, by: null, comment: null, data: null, timedOut: true, escalations: 0 });
    const info = await engine.get(id);
    expect(info.approvals[0]).toMatchObject({ status: 'expired', decisions: [] });
    const decided = approvalEvents(info.history).find((e) => e.type === 'approval:decided');
    expect(decided?.actor).toEqual({ kind: 'system', id: 'approval-policy:reject' });
    const late = await rejectsWith(engine.decide(approval.id, { approve: true, by: 'alice' }), ERROR_CODES.FORBIDDEN);
    expect(late.message).toMatch(/expired/);
  });

  it("onTimeout 'approve' auto-approves at the deadline, with the policy as the actor of the audit entry", async () => {
    const clock = new ManualClock();
    const wf = workflow('auto-approve', async (ctx) => ctx.approval('low-risk', { timeout: '2h', onTimeout: 'approve' }));
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await approvalOf(engine, id);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('2h');
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: true, by: null, timedOut: true, escalations: 0 });
    const info = await engine.get(id);
    expect(info.approvals[0]?.status).toBe('approved');
    expect(approvalEvents(info.history).find((e) => e.type === 'approval:decided')).toMatchObject({
      actor: { kind: 'system', id: 'approval-policy:approve' },
      detail: { status: 'approved' },
    });
  });

  it('a three-level escalation chain adds approvers at level 2 and 3, then applies its final outcome; escalations counts the levels passed', async () => {
    const clock = new ManualClock();
    const notices: ApprovalNotice[] = [];
    const wf = workflow('escalating', async (ctx) =>
      ctx.approval('spend', {
        approvers: ['alice'],
        timeout: '24h',
        onTimeout: { escalate: ['carol'], timeout: '4h', then: { escalate: ['dave'], timeout: '1h', then: 'reject' } },
      }),
    );
    const engine = makeEngine({ workflows: [wf], clock, observers: [{ onApproval: (n) => void notices.push(n) }] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const first = await approvalOf(engine, id);
    const t0 = first.createdAt.getTime();
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('24h');
    await eventually(async () => (await approvalOf(engine, id)).level === 2 && (await engine.get(id)).status === 'waiting', 10_000, 'level 2');
    expect(await approvalOf(engine, id)).toMatchObject({ status: 'escalated', level: 2, approvers: ['alice', 'carol'], deadline: new Date(t0 + 28 * 3_600_000) });
    await clock.advance('4h');
    await eventually(async () => (await approvalOf(engine, id)).level === 3 && (await engine.get(id)).status === 'waiting', 10_000, 'level 3');
    expect(await approvalOf(engine, id)).toMatchObject({ status: 'escalated', level: 3, approvers: ['alice', 'carol', 'dave'], deadline: new Date(t0 + 29 * 3_600_000) });
    await clock.advance('1h');
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: false, by: null, comment: null, data: null, timedOut: true, escalations: 2 });
    const events = approvalEvents((await engine.get(id)).history);
    expect(events.map((e) => e.type)).toEqual(['approval:requested', 'approval:escalated', 'approval:escalated', 'approval:decided']);
    expect(events[1]?.detail).toMatchObject({ level: 2, added: ['carol'] });
    expect(events[2]?.detail).toMatchObject({ level: 3, added: ['dave'] });
    expect(notices.map((n) => [n.kind, n.approval.level])).toEqual([
      ['requested', 1],
      ['escalated', 2],
      ['escalated', 3],
      ['decided', 3],
    ]);
  });

  it('an escalated approval is decided by an approver the escalation added', async () => {
    const clock = new ManualClock();
    const wf = workflow('escalate-then-decide', async (ctx) => ctx.approval('spend', { approvers: ['alice'], timeout: '1h', onTimeout: { escalate: ['carol'], timeout: '1h' } }));
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const a = await approvalOf(engine, id);
    await waitForStatus(engine, id, 'waiting');
    await rejectsWith(engine.decide(a.id, { approve: true, by: 'carol' }), ERROR_CODES.FORBIDDEN);
    await clock.advance('1h');
    await eventually(async () => (await approvalOf(engine, id)).status === 'escalated' && (await engine.get(id)).status === 'waiting', 10_000, 'the escalation');
    await engine.decide(a.id, { approve: true, by: 'carol', comment: 'covering for alice' });
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ approved: true, by: 'carol', comment: 'covering for alice', data: null, timedOut: false, escalations: 1 });
  });

  it('remindEvery emits a reminder entry and an observer notice per interval while undecided', async () => {
    const clock = new ManualClock();
    const notices: ApprovalNotice[] = [];
    const wf = workflow('reminded', async (ctx) => ctx.approval('review', { approvers: ['alice'], remindEvery: '1h' }));
    const engine = makeEngine({ workflows: [wf], clock, observers: [{ onApproval: (n) => void notices.push(n) }] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const a = await approvalOf(engine, id);
    for (let hour = 1; hour <= 3; hour++) {
      await waitForStatus(engine, id, 'waiting');
      await clock.advance('1h');
      await eventually(async () => approvalEvents((await engine.get(id)).history).filter((e) => e.type === 'approval:reminded').length === hour, 10_000, `reminder ${hour}`);
    }
    const reminders = approvalEvents((await engine.get(id)).history).filter((e) => e.type === 'approval:reminded');
    expect(reminders.map((e) => e.detail.nextReminder)).toEqual([2, 3, 4].map((h) => a.createdAt.getTime() + h * 3_600_000));
    expect(reminders[0]?.actor).toEqual({ kind: 'system', id: 'approval-reminder' });
    expect(notices.filter((n) => n.kind === 'reminded')).toHaveLength(3);
    await engine.decide(a.id, { approve: true, by: 'alice' });
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: true });
  });

  it('quorum 2 needs two distinct listed approvers; one rejection rejects', async () => {
    const wf = workflow('two-keys', async (ctx) => {
      const a = await ctx.approval('deploy', { approvers: ['alice', 'bob', 'carol'], quorum: 2 });
      const b = await ctx.approval('rollback-plan', { approvers: ['alice', 'bob', 'carol'], quorum: 2 });
      return [a.approved, a.by, b.approved, b.by];
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const deploy = await approvalOf(engine, id, 'deploy');
    const one = await engine.decide(deploy.id, { approve: true, by: 'alice' });
    expect(one.status).toBe('pending');
    expect((await engine.decide(deploy.id, { approve: true, by: 'alice' })).decisions).toHaveLength(1); // the same person twice counts once
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.get(id)).approvals).toHaveLength(1);
    expect((await engine.decide(deploy.id, { approve: true, by: 'bob' })).status).toBe('approved');
    const plan = await approvalOf(engine, id, 'rollback-plan');
    await engine.decide(plan.id, { approve: true, by: 'carol' });
    expect((await engine.decide(plan.id, { approve: false, by: 'bob', comment: 'no plan' })).status).toBe('rejected');
    expect(await engine.result(id, { timeout: '20s' })).toEqual([true, 'bob', false, 'bob']);
  });

  it('observers hear requested and decided with what a notifier needs: approval, approvers, payload, deadline, the CLI command, and who started the task', async () => {
    const notices: ApprovalNotice[] = [];
    const wf = workflow('notify-me', async (ctx) => ctx.approval('review', { payload: { title: 'Q3' }, approvers: ['alice'], timeout: '1h' }));
    const engine = makeEngine({ workflows: [wf], observers: [{ onApproval: (n) => void notices.push(n) }] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined, { by: 'erin' });
    const a = await approvalOf(engine, id);
    await eventually(() => notices.length === 1, 10_000, 'the requested notice');
    expect(notices[0]).toMatchObject({
      kind: 'requested',
      approveCommand: `stepwise approve ${a.id} --as <name>`,
      rejectCommand: `stepwise reject ${a.id} --as <name>`,
      startedBy: { kind: 'user', id: 'erin' },
      approval: { id: a.id, taskId: id, approvers: ['alice'], payload: { title: 'Q3' }, deadline: a.deadline },
    });
    await engine.decide(a.id, { approve: false, by: 'alice', comment: 'numbers are off' });
    expect(notices[1]).toMatchObject({ kind: 'decided', startedBy: { id: 'erin' }, approval: { status: 'rejected', outcome: { approved: false, comment: 'numbers are off' } } });
    expect(await engine.result(id, { timeout: '20s' })).toMatchObject({ approved: false });
  });

  it("requires: the engine refuses a guarded step unless the task's approval of that name is approved, whatever the code does", async () => {
    let published = 0;
    const careless = workflow('careless', async (ctx, input: { ask: boolean }) => {
      if (input.ask) await ctx.approval('review', { approvers: ['alice'] }); // the code ignores the answer
      return ctx.step('publish', () => ++published, { requires: 'review', retry: 5 });
    });
    const engine = makeEngine({ workflows: [careless] });
    await startWorker(engine);
    const rejected = await engine.start(careless, { ask: true });
    await engine.decide((await approvalOf(engine, rejected.id)).id, { approve: false, by: 'alice' });
    await waitForStatus(engine, rejected.id, 'failed');
    const never = await engine.start(careless, { ask: false });
    await waitForStatus(engine, never.id, 'failed');
    const approved = await engine.start(careless, { ask: true });
    await engine.decide((await approvalOf(engine, approved.id)).id, { approve: true, by: 'alice' });
    expect(await engine.result(approved.id, { timeout: '20s' })).toBe(1);
    expect(published).toBe(1);
    for (const [taskId, why] of [
      [rejected.id, /requires approval "review", which was rejected/],
      [never.id, /which this task never asked for/],
    ] as const) {
      const info = await engine.get(taskId);
      const step = info.steps.find((s) => s.name === 'publish');
      expect(step).toMatchObject({ status: 'failed', attempts: 0 });
      expect(step?.error).toMatchObject({ code: ERROR_CODES.FORBIDDEN, name: 'ApprovalRequiredError' });
      expect(step?.error?.message).toMatch(why);
      expect(info.history.some((e) => e.type === 'step:failed' && e.step.name === 'publish')).toBe(true);
    }
  });

  it('rejects invalid approval options with a typed error that fails the task with an actionable message', async () => {
    const wf = workflow('bad-options', async (ctx) => ctx.approval('x', { approvers: ['a'], quorum: 2 }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    expect(info.status === 'failed' && info.error.message).toMatch(/quorum of 2 needs at least 2 listed approvers, got 1/);
    expect(info.approvals).toEqual([]);
  });
});
