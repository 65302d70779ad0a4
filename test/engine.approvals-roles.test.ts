// Approvals by role (`role:<role>` among the approvers), escalations that hand over instead of
// adding approvers, and a repeated decision whose new comment is reported as not recorded.
import { describe, expect, it } from 'vitest';
import { Engine, isStepwiseError, openStore, workflow, type ApprovalInfo } from '../src/index.ts';
import type { ApprovalUpdate } from '../src/store.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

async function openApproval(engine: Engine, taskId: string): Promise<ApprovalInfo> {
  let found: ApprovalInfo | undefined;
  await eventually(async () => (found = (await engine.get(taskId)).approvals[0]) !== undefined, 10_000, 'the approval');
  return found as ApprovalInfo;
}

describe('approvals by role, hand-over escalation, repeated decisions', () => {
  it("lets anyone holding a listed role decide ('role:editor'), and refuses other roles naming them", async () => {
    const wf = workflow('by-role', async (ctx) => (await ctx.approval('publish', { approvers: ['role:editor', 'boss'] })).by);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, {});
    const a = await openApproval(engine, id);
    const refused = await engine.decide(a.id, { approve: true, by: 'vera', roles: ['viewer'] }).catch((e: unknown) => e);
    expect(isStepwiseError(refused, 'FORBIDDEN')).toBe(true);
    expect((refused as Error).message).toContain('vera (roles viewer) may not decide');
    // An editor's queue lists it (by role); a viewer's does not.
    expect((await engine.approvals({ approver: 'erin', roles: ['editor'] })).map((x) => x.id)).toEqual([a.id]);
    expect(await engine.approvals({ approver: 'vera', roles: ['viewer'] })).toEqual([]);
    expect(await engine.approvals({ approver: 'erin' })).toEqual([]);
    await engine.decide(a.id, { approve: true, by: 'erin', roles: ['editor'] });
    expect(await engine.result(id)).toBe('erin');
  });

  it('with handover: true the escalation target takes the approval over and the first approver loses the right', async () => {
    const clock = new ManualClock();
    const wf = workflow('handover', async (ctx) => {
      const r = await ctx.approval('sign-off', { approvers: ['alice'], timeout: '1h', onTimeout: { escalate: ['carol'], timeout: '1h', handover: true } });
      return { by: r.by, escalations: r.escalations };
    });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf, {});
    const a = await openApproval(engine, id);
    // Parked on it (the record is written before the run parks): a run still going when the clock
    // jumps an hour would give its lease up.
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('61m');
    const late = await engine.decide(a.id, { approve: true, by: 'alice' }).catch((e: unknown) => e);
    expect(isStepwiseError(late, 'FORBIDDEN')).toBe(true);
    expect((late as Error).message).toContain('its approvers are carol');
    await engine.decide(a.id, { approve: true, by: 'carol' });
    expect(await engine.result(id)).toEqual({ by: 'carol', escalations: 1 });
  });

  it('without handover the escalation adds approvers (the first approver keeps the right)', async () => {
    const clock = new ManualClock();
    const wf = workflow('adds', async (ctx) => (await ctx.approval('sign-off', { approvers: ['alice'], timeout: '1h', onTimeout: { escalate: ['carol'], timeout: '1h' } })).by);
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf, {});
    const a = await openApproval(engine, id);
    // Parked on it (the record is written before the run parks): a run still going when the clock
    // jumps an hour would give its lease up.
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('61m');
    await engine.decide(a.id, { approve: true, by: 'alice' });
    expect(await engine.result(id)).toBe('alice');
  });

  it('a repeated decision with a new comment returns the first decision and says the comment was not recorded', async () => {
    const wf = workflow('twice', async (ctx) => {
      await ctx.approval('ok', { approvers: ['alice', 'bob'], quorum: 2 });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, {});
    const a = await openApproval(engine, id);
    const first = await engine.decide(a.id, { approve: true, by: 'alice', comment: 'looks good' });
    expect(first.notRecorded).toBeUndefined();
    const again = await engine.decide(a.id, { approve: true, by: 'alice', comment: 'also fix the title' });
    expect(again.decisions.map((d) => d.comment)).toEqual(['looks good']);
    expect(again.notRecorded).toMatchObject({ comment: 'also fix the title' });
    expect(again.notRecorded?.reason).toContain('this comment was not recorded');
    // The same comment again (a double click) is a plain repeat.
    expect((await engine.decide(a.id, { approve: true, by: 'alice', comment: 'looks good' })).notRecorded).toBeUndefined();
  });

  it('refuses unknown decide options and bad roles with INVALID_ARGUMENT naming them', async () => {
    const engine = makeEngine({ workflows: [] });
    const bad = await engine.decide('x', { approve: true, by: 'alice', comentt: 'typo' } as never).catch((e: unknown) => e);
    expect(isStepwiseError(bad, 'INVALID_ARGUMENT')).toBe(true);
    expect((bad as Error).message).toContain('unknown option "comentt"');
    const roles = await engine.decide('x', { approve: true, by: 'alice', roles: 'editor' } as never).catch((e: unknown) => e);
    expect((roles as Error).message).toContain('`roles` must be a list');
  });

  it('a repeat whose write lost the race to the first click gets the first answer, even once the task has finished', async () => {
    const wf = workflow('race', async (ctx) => (await ctx.approval('ok', { approvers: ['alice'] })).by);
    const inner = await openStore(tempDbUrl());
    let held: (() => void) | null = null;
    let first = true;
    // The first decide's write waits (holding a stale version) until the second has settled the approval and the task ended.
    const store = new Proxy(inner, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop === 'updateApproval') {
          return async (w: ApprovalUpdate) => {
            if (first && w.plan) {
              first = false;
              await new Promise<void>((resolve) => (held = resolve));
            }
            return inner.updateApproval(w);
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const engine = new Engine({ store, workflows: [wf] });
    try {
      await startWorker(engine);
      const { id } = await engine.start(wf, {});
      const a = await openApproval(engine, id);
      const slow = engine.decide(a.id, { approve: true, by: 'alice', idempotencyKey: 'click' });
      await eventually(() => held !== null, 10_000, 'the first write to wait');
      const fast = await engine.decide(a.id, { approve: true, by: 'alice', idempotencyKey: 'click' });
      expect(await engine.result(id, { timeout: '20s' })).toBe('alice');
      (held as unknown as () => void)();
      expect(await slow).toEqual(fast);
    } finally {
      await engine.close();
      await inner.close();
    }
  });
});
