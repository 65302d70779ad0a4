// Budgets that ask a person to raise them (`budget.onExceeded: { ask }`), through the official
// openai client against the local OpenAI-compatible server.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ERROR_CODES, Engine, InvalidArgumentError, TaskFailedError, workflow, type ApprovalInfo } from '../src/index.ts';
import { chatCompletion } from '../src/ai/index.ts';
import { FAST, eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
let client: OpenAI;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL });
});
afterEach(async () => {
  await fake.close();
});

async function openApproval(engine: Engine, taskId: string): Promise<ApprovalInfo> {
  let found: ApprovalInfo | undefined;
  await eventually(
    async () => {
      [found] = await engine.approvals({ taskId, status: 'pending' });
      return found !== undefined;
    },
    10_000,
    `an approval of task ${taskId}`,
  );
  return found as ApprovalInfo;
}

const twoCalls = (name: string, budget?: object) =>
  workflow(
    name,
    async (ctx) => {
      await chatCompletion(ctx, 'first', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] });
      const r = await chatCompletion(ctx, 'second', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'y' }] });
      return r.choices[0]?.message.content;
    },
    budget ? { budget } : {},
  );

describe('a budget that asks a person before a call would exceed it', () => {
  it('parks on an approval with what was spent and the limit; approved with a higher limit, the budget is raised durably and the call is made', async () => {
    fake.script([
      { kind: 'text', chunks: ['a'], usage: { prompt_tokens: 60, completion_tokens: 40 } },
      { kind: 'text', chunks: ['b'], usage: { prompt_tokens: 10, completion_tokens: 5 } },
    ]);
    const wf = twoCalls('raise', { tokens: 100, onExceeded: { ask: { approvers: ['finance'] } } });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const approval = await openApproval(engine, id);
    await waitForStatus(engine, id, 'waiting');
    expect(approval).toMatchObject({
      name: 'budget:second',
      approvers: ['finance'],
      payload: { step: 'second', limit: 'tokens', budget: { tokens: 100 }, spent: { tokens: 100 }, projected: 100 },
    });
    expect(fake.requests).toHaveLength(1);
    // A limit that would refuse the call again, or a malformed one, is refused when decided.
    for (const data of [undefined, { tokens: 80 }, { tokens: 'lots' }, { usd: 1 }, { tokens: 500, euros: 1 }]) {
      await expect(engine.decide(approval.id, { approve: true, by: 'finance', data })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    }
    await engine.decide(approval.id, { approve: true, by: 'finance', data: { tokens: 500 } });
    expect(await engine.result(id, { timeout: '20s' })).toBe('b');
    expect(fake.requests).toHaveLength(2);
    const info = await engine.get(id);
    // The raised limit is in the task's usage column (what a resumed run reads).
    expect(info.usage?.budget).toMatchObject({ tokens: 500 });
    expect(info.usage?.total.totalTokens).toBe(115);
    expect(info.steps.find((s) => s.name === 'second')).toMatchObject({ status: 'completed' });
  });

  it('a task parked on the budget approval is resumed by another engine: the same approval, decided while no worker ran, raises the budget once', async () => {
    fake.script([
      { kind: 'text', chunks: ['a'], usage: { prompt_tokens: 60, completion_tokens: 40 } },
      { kind: 'text', chunks: ['b'], usage: { prompt_tokens: 10, completion_tokens: 5 } },
    ]);
    const wf = twoCalls('resume-raise', { tokens: 100, onExceeded: { ask: { approvers: ['finance'] } } });
    const url = tempDbUrl();
    const first = new Engine({ store: url, workflows: [wf] });
    let id: string;
    try {
      const w = first.worker(FAST);
      await w.start();
      ({ id } = await first.start(wf));
      await openApproval(first, id);
      await waitForStatus(first, id, 'waiting');
      await w.stop();
    } finally {
      await first.close();
    }
    const engine = makeEngine({ store: url, workflows: [wf] });
    const approval = await openApproval(engine, id);
    await engine.decide(approval.id, { approve: true, by: 'finance', data: { tokens: 200 } });
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toBe('b');
    const info = await engine.get(id);
    expect(info.approvals).toHaveLength(1);
    expect(info.usage?.budget).toMatchObject({ tokens: 200 });
    expect(fake.requests).toHaveLength(2);
  });

  it('a rejection fails the task with BUDGET_EXCEEDED, and the provider is not called again', async () => {
    fake.script([{ kind: 'text', chunks: ['a'], usage: { prompt_tokens: 60, completion_tokens: 40 } }]);
    const wf = twoCalls('refuse');
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    // The per-start budget carries the ask too.
    const { id } = await engine.start(wf, undefined, { budget: { usd: 0.00003, onExceeded: { ask: {} } } });
    const approval = await openApproval(engine, id);
    expect(approval.payload).toMatchObject({ step: 'second', limit: 'usd', budget: { usd: 0.00003 } });
    await engine.decide(approval.id, { approve: false, by: 'finance', comment: 'too expensive' });
    const err = await engine.result(id, { timeout: '20s' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskFailedError);
    expect((err as TaskFailedError).cause).toMatchObject({ code: 'BUDGET_EXCEEDED', name: 'BudgetExceededError' });
    expect(fake.requests).toHaveLength(1);
  });

  it('the default stays a failure, and a malformed onExceeded is refused at start', async () => {
    const wf = twoCalls('plain', { tokens: 100, onExceeded: 'fail' });
    const engine = makeEngine({ workflows: [wf] });
    for (const onExceeded of ['ask', { ask: { quorum: 0 } }, { ask: {}, then: 'fail' }]) {
      await expect(engine.start(wf, undefined, { budget: { tokens: 10, onExceeded } as never })).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    expect((await engine.list()).tasks).toHaveLength(0);
  });
});
