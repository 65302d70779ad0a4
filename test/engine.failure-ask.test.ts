import { describe, expect, it } from 'vitest';
import { Engine, ERROR_CODES, workflow, type ApprovalInfo } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus, FAST } from './support/engine.ts';

/** The open approval named `name` of the task, once it exists. */
async function openApproval(engine: Engine, taskId: string, name: string): Promise<ApprovalInfo> {
  let found: ApprovalInfo | undefined;
  await eventually(
    async () => {
      [found] = await engine.approvals({ taskId, status: ['pending', 'escalated'] });
      return found?.name === name;
    },
    10_000,
    `approval ${name} of task ${taskId}`,
  );
  return found as ApprovalInfo;
}

const FAST_RETRY = { maxAttempts: 2, initialDelay: 1 };

describe("onExhausted: 'ask' (a person decides a step whose attempts ran out)", () => {
  it("parks on an approval carrying the step and its last error; only valid data from a listed approver is taken, and a supplied output becomes the step's output", async () => {
    let runs = 0;
    const wf = workflow('extract', async (ctx) => {
      const out = await ctx.step(
        'parse',
        () => {
          runs++;
          throw new Error('invoice layout not recognised');
        },
        { retry: FAST_RETRY, onExhausted: 'ask', ask: { approvers: ['ops'] } },
      );
      return { parsed: out };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await openApproval(engine, id, 'exhausted:parse');
    await waitForStatus(engine, id, 'waiting');
    expect(approval).toMatchObject({
      approvers: ['ops'],
      payload: { step: 'parse', attempts: 2, error: { name: 'Error', message: 'invoice layout not recognised' }, actions: ['supply', 'retry', 'fail'] },
    });
    expect((await engine.explain(id)).wait).toMatchObject({ kind: 'approval', step: 'parse', name: 'exhausted:parse' });
    // Data the step could not apply is refused when decided, and changes nothing.
    for (const data of [undefined, { action: 'redo' }, { action: 'supply' }, { action: 'skip' }]) {
      await expect(engine.decide(approval.id, { approve: true, by: 'ops', data })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    }
    await expect(engine.decide(approval.id, { approve: true, by: 'eve', data: { action: 'retry' } })).rejects.toMatchObject({ code: ERROR_CODES.FORBIDDEN });
    expect((await engine.approvals({ taskId: id }))[0]?.decisions).toEqual([]);
    await engine.decide(approval.id, { approve: true, by: 'ops', data: { action: 'supply', output: { total: 42 } } });
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ parsed: { total: 42 } });
    expect(runs).toBe(2);
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ name: 'parse', status: 'completed', attempts: 2, output: { total: 42 } });
    expect(info.approvals[0]).toMatchObject({ status: 'approved', outcome: { approved: true, by: 'ops', data: { action: 'supply', output: { total: 42 } } } });
  });

  it('a retry decision gives the step a fresh set of attempts (those before are kept in the count, not held against its retry policy)', async () => {
    const seen: number[] = [];
    const wf = workflow('flaky', async (ctx) =>
      ctx.step(
        'call',
        ({ attempt }) => {
          seen.push(attempt);
          if (attempt <= 3) throw new Error(`down (attempt ${attempt})`);
          return 'up';
        },
        { retry: FAST_RETRY, onExhausted: 'ask' },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const first = await openApproval(engine, id, 'exhausted:call');
    expect(first.payload).toMatchObject({ attempts: 2, error: { message: 'down (attempt 2)' } });
    await engine.decide(first.id, { approve: true, by: 'ops', data: { action: 'retry' } });
    // Attempt 3 fails and attempt 4 runs: two more attempts, as the policy allows.
    expect(await engine.result(id, { timeout: '20s' })).toBe('up');
    expect(seen).toEqual([1, 2, 3, 4]);
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ status: 'completed', attempts: 4, output: 'up' });
    expect(info.approvals).toHaveLength(1);
  });

  it('exhausted again after a retry decision asks again, with a new approval', async () => {
    let runs = 0;
    const wf = workflow('stubborn', async (ctx) =>
      ctx.step(
        'call',
        () => {
          runs++;
          throw new Error('still down');
        },
        { retry: FAST_RETRY, onExhausted: 'ask' },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const first = await openApproval(engine, id, 'exhausted:call');
    await engine.decide(first.id, { approve: true, by: 'ops', data: { action: 'retry' } });
    let second: ApprovalInfo | undefined;
    await eventually(
      async () => {
        second = (await engine.approvals({ taskId: id, status: 'pending' }))[0];
        return second !== undefined && second.id !== first.id;
      },
      10_000,
      'a second approval',
    );
    expect(second?.payload).toMatchObject({ attempts: 4 });
    expect(runs).toBe(4);
    await engine.decide((second as ApprovalInfo).id, { approve: true, by: 'ops', data: { action: 'fail' } });
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/still down/);
    expect(info.steps[0]).toMatchObject({ status: 'failed', attempts: 4 });
  });

  it('skip takes the declared fallback (recorded as skipped); a rejection fails the step with the error that exhausted it', async () => {
    const wf = workflow('optional-ask', async (ctx) => {
      const tags = await ctx.step(
        'enrich',
        () => {
          throw new Error('enrichment down');
        },
        { retry: FAST_RETRY, onExhausted: 'ask', fallback: { tags: [] } },
      );
      return tags;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const skipped = await engine.start(wf);
    const rejected = await engine.start(wf);
    const a = await openApproval(engine, skipped.id, 'exhausted:enrich');
    const b = await openApproval(engine, rejected.id, 'exhausted:enrich');
    expect(a.payload).toMatchObject({ actions: ['supply', 'retry', 'skip', 'fail'] });
    await engine.decide(a.id, { approve: true, by: 'ops', data: { action: 'skip' } });
    await engine.decide(b.id, { approve: false, by: 'ops', comment: 'not worth it' });
    expect(await engine.result(skipped.id, { timeout: '20s' })).toEqual({ tags: [] });
    expect((await engine.get(skipped.id)).steps[0]).toMatchObject({ status: 'completed', output: { tags: [] }, error: { message: 'enrichment down' } });
    await waitForStatus(engine, rejected.id, 'failed');
    const info = await engine.get(rejected.id);
    expect(info.status === 'failed' && info.error.message).toMatch(/enrichment down/);
  });

  it('the park survives the engine going away: a decision made while no worker runs is applied by the next one', async () => {
    let runs = 0;
    const wf = workflow('durable-ask', async (ctx) => {
      const v = await ctx.step(
        'x',
        () => {
          runs++;
          throw new Error('broken');
        },
        { retry: FAST_RETRY, onExhausted: 'ask' },
      );
      return ctx.step('after', () => `${String(v)}!`);
    });
    const url = tempDbUrl();
    const first = new Engine({ store: url, workflows: [wf] });
    let id: string;
    try {
      const w = first.worker(FAST);
      await w.start();
      ({ id } = await first.start(wf));
      await openApproval(first, id, 'exhausted:x');
      await waitForStatus(first, id, 'waiting');
      await w.stop();
    } finally {
      await first.close();
    }
    const engine = makeEngine({ store: url, workflows: [wf] });
    const approval = await openApproval(engine, id, 'exhausted:x');
    await engine.decide(approval.id, { approve: true, by: 'ops', data: { action: 'supply', output: 'manual' } });
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toBe('manual!');
    expect(runs).toBe(2);
  });

  it('a timeout that rejects fails the step; one that approves (no action in its data) fails it with a recorded INVALID_ARGUMENT', async () => {
    const clock = new ManualClock();
    const make = (name: string, onTimeout: 'reject' | 'approve') =>
      workflow(name, async (ctx) =>
        ctx.step(
          'x',
          () => {
            throw new Error('broken');
          },
          { retry: { maxAttempts: 1 }, onExhausted: 'ask', ask: { timeout: '1h', onTimeout } },
        ),
      );
    const rejecting = make('t-reject', 'reject');
    const approving = make('t-approve', 'approve');
    const engine = makeEngine({ workflows: [rejecting, approving], clock });
    await startWorker(engine);
    const r = await engine.start(rejecting);
    const a = await engine.start(approving);
    await openApproval(engine, r.id, 'exhausted:x');
    await openApproval(engine, a.id, 'exhausted:x');
    await waitForStatus(engine, r.id, 'waiting');
    await waitForStatus(engine, a.id, 'waiting');
    await clock.advance('1h');
    await waitForStatus(engine, r.id, 'failed', 20_000);
    await waitForStatus(engine, a.id, 'failed', 20_000);
    const ri = await engine.get(r.id);
    expect(ri.status === 'failed' && ri.error.message).toMatch(/broken/);
    const ai = await engine.get(a.id);
    expect(ai.steps[0]?.error).toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    expect(ai.steps[0]?.error?.message).toMatch(/cannot be applied: an approving decision needs data/);
  });
});
