// A parent's budget that covers its subtree (`budget.scope: 'subtree'`): the model calls of the
// parent and of every task below it count together, wherever they run; a call that would pass it
// is not made and its task fails with BUDGET_EXCEEDED naming the task whose budget it is.
// Model calls go through the official openai client to the local OpenAI-compatible server.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChildFailedError, ERROR_CODES, workflow } from '../src/index.ts';
import { chatCompletion } from '../src/ai/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
let client: OpenAI;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  // Every call reports 100 tokens.
  fake.script([{ kind: 'text', chunks: ['ok'], usage: { prompt_tokens: 60, completion_tokens: 40 } }]);
  client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL });
});
afterEach(async () => {
  await fake.close();
});

const call = (ctx: Parameters<Parameters<typeof workflow>[1]>[0], name: string) => chatCompletion(ctx, name, client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: name }] });

/** One model call of 100 tokens. */
const leaf = workflow('budget-leaf', async (ctx) => {
  await call(ctx, 'think');
  return 'done';
});

describe('a budget that covers the subtree of its task', () => {
  it("children's calls count against the parent's start budget; the call that would pass it is not made, and the child fails naming the parent", async () => {
    const parent = workflow('budget-parent', async (ctx) => {
      await ctx.child(leaf, undefined, { name: 'a' });
      await ctx.child(leaf, undefined, { name: 'b' });
      try {
        await ctx.child(leaf, undefined, { name: 'c' });
        return 'no refusal';
      } catch (e) {
        if (!(e instanceof ChildFailedError)) throw e;
        return { code: e.code, childCode: e.childCode, message: e.message };
      }
    });
    const engine = makeEngine({ workflows: [parent, leaf] });
    await startWorker(engine, { concurrency: 2 });
    const { id } = await engine.start(parent, undefined, { budget: { tokens: 150, scope: 'subtree' } });
    const out = (await engine.result(id, { timeout: '30s' })) as { childCode: string; message: string };
    // a spent 100; b was let through (100 < 150) and spent 100; c's call was refused before it was made.
    expect(fake.requests).toHaveLength(2);
    expect(out.childCode).toBe(ERROR_CODES.BUDGET_EXCEEDED);
    const info = await engine.get(id);
    expect(info.usage?.children?.totalTokens).toBe(200);
    const c = info.children.find((x) => x.status === 'failed');
    if (!c) throw new Error('no failed child');
    const failed = await engine.get(c.id);
    if (failed.status !== 'failed') throw new Error(`child ${c.id} is ${failed.status}`);
    expect(failed.error).toMatchObject({ code: ERROR_CODES.BUDGET_EXCEEDED });
    expect(failed.error.message).toContain(`the tokens budget of task ${id} and the tasks below it (200 of 150 tokens`);
    expect(failed.steps.find((s) => s.name === 'think')).toBeUndefined();
  });

  it("a workflow's subtree budget reaches its grandchildren, and the parent's own calls count its subtree's spending", async () => {
    const middle = workflow('budget-middle', async (ctx) => {
      await ctx.child(leaf, undefined, { name: 'one' });
      await ctx.child(leaf, undefined, { name: 'two' });
      return 'middle';
    });
    const root = workflow(
      'budget-root',
      async (ctx) => {
        await ctx.child(middle, undefined);
        await call(ctx, 'summarise');
        return 'root';
      },
      { budget: { tokens: 150, scope: 'subtree' } },
    );
    const engine = makeEngine({ workflows: [root, middle, leaf] });
    await startWorker(engine, { concurrency: 3 });
    const { id } = await engine.start(root);
    await waitForStatus(engine, id, 'failed', 30_000);
    // Both grandchildren's calls were made (the second projected 100 < 150); the root's own was not.
    expect(fake.requests).toHaveLength(2);
    const info = await engine.get(id);
    if (info.status !== 'failed') throw new Error(`task ${id} is ${info.status}`);
    expect(info.error).toMatchObject({ code: ERROR_CODES.BUDGET_EXCEEDED });
    expect(info.error.message).toContain('the tokens budget of this task and the tasks below it (200 of 150 tokens');
    expect(info.usage?.total.totalTokens).toBe(0);
    expect(info.usage?.children?.totalTokens).toBe(200);
  });

  it("a task's own budget (scope 'task', the default) does not count its children's calls", async () => {
    const parent = workflow(
      'budget-own',
      async (ctx) => {
        await ctx.child(leaf, undefined, { name: 'a' });
        await ctx.child(leaf, undefined, { name: 'b' });
        await call(ctx, 'own');
        return 'fine';
      },
      { budget: { tokens: 150 } },
    );
    const engine = makeEngine({ workflows: [parent, leaf] });
    await startWorker(engine, { concurrency: 2 });
    const { id } = await engine.start(parent);
    expect(await engine.result(id, { timeout: '30s' })).toBe('fine');
    expect(fake.requests).toHaveLength(3);
  });

  it('refuses a scope it does not know and a subtree budget that asks, at start and at definition', async () => {
    const engine = makeEngine({ workflows: [leaf] });
    await expect(engine.start(leaf, undefined, { budget: { tokens: 10, scope: 'tree' as never } })).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringContaining("budget.scope must be 'task' or 'subtree', got \"tree\""),
    });
    await expect(engine.start(leaf, undefined, { budget: { tokens: 10, scope: 'subtree', onExceeded: { ask: { approvers: ['finance'] } } } })).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringContaining('a subtree budget cannot ask'),
    });
    expect(() => workflow('bad-scope', async () => 1, { budget: { usd: 1, scope: 'everything' as never } })).toThrow(/budget\.scope must be 'task' or 'subtree'/);
    expect((await engine.list({})).tasks).toHaveLength(0);
  });
});
