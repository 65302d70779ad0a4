import { describe, expect, it } from 'vitest';
import { ChildFailedError, ERROR_CODES, workflow, type WorkflowContext } from '../src/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const double = workflow('double', async (ctx, input: { n: number }) => ctx.step('times-two', () => input.n * 2));

describe('child tasks', () => {
  it('ctx.child starts a child task, parks the parent while it runs, and returns its output', async () => {
    const parent = workflow('parent', async (ctx, input: { n: number }) => {
      const out = await ctx.child(double, { n: input.n });
      const typed: number = out; // the output is typed from the child's definition
      return { doubled: typed };
    });
    const engine = makeEngine({ workflows: [parent, double] });
    // One slot: the child can run only if the waiting parent holds none.
    await startWorker(engine, { concurrency: 1 });
    const { id } = await engine.start(parent, { n: 21 });
    expect(await engine.result(id)).toEqual({ doubled: 42 });
    const info = await engine.get(id);
    expect(info.parent).toBeNull();
    expect(info.children).toHaveLength(1);
    const childId = info.children[0]?.id as string;
    expect(info.children[0]).toEqual({ id: childId, workflow: 'double', status: 'succeeded' });
    const childInfo = await engine.get(childId);
    expect(childInfo.parent).toEqual({ id, workflow: 'parent', status: 'succeeded' });
    expect(childInfo.input).toEqual({ n: 21 });
    // The parent's log records the child's start (its step) and its end (the signal it sent).
    const received = info.history.flatMap((e) => (e.type === 'signal:received' ? [e] : []));
    expect(received.map((e) => [e.name, e.actor])).toEqual([[`child:${childId}`, { kind: 'system', id: `task:${childId}` }]]);
    expect(received[0]?.payload).toEqual({ status: 'succeeded', output: 42, error: null });
    expect(info.steps.map((s) => `${s.kind}:${s.name}`)).toEqual(['step:child:double', `event:child:${childId}`]);
    const listed = await engine.list({ parent: id });
    expect(listed.tasks.map((t) => t.id)).toEqual([childId]);
    expect((await engine.list({ parent: childId })).tasks).toEqual([]);
  });

  it('startChild returns a handle (id, result) whose result is the same promise when asked twice', async () => {
    const parent = workflow('handles', async (ctx) => {
      const a = await ctx.startChild(double, { n: 1 }, { name: 'first' });
      const b = await ctx.startChild(double, { n: 2 }, { name: 'second' });
      expect(a.result()).toBe(a.result());
      return { ids: [a.id, b.id], sum: (await a.result()) + (await b.result()) };
    });
    const engine = makeEngine({ workflows: [parent, double] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    const out = await engine.result<{ ids: string[]; sum: number }>(id);
    expect(out.sum).toBe(6);
    expect((await engine.get(id)).children.map((c) => c.id)).toEqual(out.ids);
  });

  it.each([200, 1000])(
    'Promise.all over %i ctx.child calls fans out and back in, each child started once',
    async (n) => {
      const parent = workflow('fan-out', async (ctx, input: { count: number }) => {
        const items = Array.from({ length: input.count }, (_, i) => i);
        const outs = await Promise.all(items.map((i) => ctx.child(double, { n: i })));
        return outs.reduce((a, b) => a + b, 0);
      });
      const engine = makeEngine({ workflows: [parent, double] });
      await startWorker(engine, { concurrency: 16 });
      const { id } = await engine.start(parent, { count: n });
      expect(await engine.result(id, { timeout: 120_000 })).toBe(n * (n - 1));
      const info = await engine.get(id);
      expect(info.children).toHaveLength(n);
      expect(new Set(info.children.map((c) => c.id)).size).toBe(n);
      expect(info.children.every((c) => c.status === 'succeeded')).toBe(true);
      expect((await engine.count({ workflow: 'double' })).succeeded).toBe(n);
    },
    120_000,
  );

  it('a failed child is a ChildFailedError in the parent, with the child id, code and message', async () => {
    const failing = workflow('failing', async (ctx) => {
      await ctx.step('boom', () => {
        throw Object.assign(new Error('the model refused'), { retryable: false });
      });
    });
    const parent = workflow('catches', async (ctx) => {
      try {
        await ctx.child(failing, undefined);
        return { caught: null };
      } catch (e) {
        const err = e as ChildFailedError;
        return { caught: { name: err.name, code: err.code, childId: err.childId, childStatus: err.childStatus, childCode: err.childCode, message: err.childMessage } };
      }
    });
    const engine = makeEngine({ workflows: [parent, failing] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    const out = await engine.result<{ caught: Record<string, unknown> }>(id);
    const childId = (await engine.get(id)).children[0]?.id;
    expect(out.caught).toMatchObject({ name: 'ChildFailedError', code: ERROR_CODES.CHILD_FAILED, childId, childStatus: 'failed', childCode: 'STEP_FAILED' });
    expect(String(out.caught.message)).toContain('the model refused');
  });

  it('an uncaught child failure fails the parent with CHILD_FAILED', async () => {
    const failing = workflow('failing-2', async () => {
      throw new Error('no');
    });
    const parent = workflow('does-not-catch', async (ctx) => ctx.child(failing, undefined));
    const engine = makeEngine({ workflows: [parent, failing] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.CHILD_FAILED);
  });

  it('a child of an unknown workflow fails the parent call with WORKFLOW_NOT_FOUND at start, nothing started', async () => {
    const parent = workflow('unknown-child', async (ctx) => {
      try {
        await ctx.child('no-such-workflow', {});
        return 'started';
      } catch (e) {
        return (e as { code: string }).code;
      }
    });
    const engine = makeEngine({ workflows: [parent] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    expect(await engine.result(id)).toBe(ERROR_CODES.WORKFLOW_NOT_FOUND);
    expect((await engine.get(id)).children).toEqual([]);
    const step = (await engine.get(id)).steps[0];
    expect(step?.attempts).toBe(1); // refused, not retried
  });

  it('a workflow that starts itself stops at the depth limit with CHILD_DEPTH_EXCEEDED', async () => {
    const recurse: ReturnType<typeof workflow<{ depth: number }, number>> = workflow('recurse', async (ctx: WorkflowContext, input: { depth: number }): Promise<number> => {
      try {
        return await ctx.child(recurse, { depth: input.depth + 1 });
      } catch (e) {
        if ((e as { code?: string }).code === ERROR_CODES.CHILD_DEPTH_EXCEEDED) return input.depth;
        throw e;
      }
    });
    const engine = makeEngine({ workflows: [recurse], limits: { childDepth: 3 } });
    await startWorker(engine, { concurrency: 8 });
    const { id } = await engine.start(recurse, { depth: 0 });
    // Depths 0 (the root), 1, 2, 3 run; the task at depth 3 cannot start a child at depth 4.
    expect(await engine.result(id)).toBe(3);
  });

  it('refuses bad options with INVALID_ARGUMENT naming the option', async () => {
    const parent = workflow('bad-options', async (ctx) => {
      await ctx.child(double, { n: 1 }, { onParentEnd: 'explode' } as never);
    });
    const engine = makeEngine({ workflows: [parent, double] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(info.status === 'failed' && info.error.message).toContain('onParentEnd');
    await expect(engine.list({ parent: '' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
  });
});

describe('child tasks: retrying the parent', () => {
  it('a retry reuses finished children; a retry fromStep of the start starts a new child', async () => {
    const attempts = { n: 0 };
    const flaky = workflow('flaky-child', async (ctx) =>
      ctx.step('try', () => {
        attempts.n++;
        if (attempts.n < 3) throw Object.assign(new Error(`attempt ${attempts.n} failed`), { retryable: false });
        return 'ok';
      }),
    );
    const parent = workflow('retried-parent', async (ctx) => {
      const first = await ctx.child(double, { n: 4 }, { name: 'stable' });
      const second = await ctx.child(flaky, undefined, { name: 'flaky' });
      return { first, second };
    });
    const engine = makeEngine({ workflows: [parent, double, flaky] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    // A plain retry replays the recorded ends: the failed child's failure again, no new child.
    await engine.retry(id);
    await waitForStatus(engine, id, 'failed');
    expect((await engine.get(id)).children).toHaveLength(2);
    expect(attempts.n).toBe(1);
    // From the failed child's start: a new child of that call (the first child is reused).
    await engine.retry(id, { fromStep: 'flaky' });
    await waitForStatus(engine, id, 'failed');
    await engine.retry(id, { fromStep: 'flaky' });
    expect(await engine.result(id)).toEqual({ first: 8, second: 'ok' });
    const children = (await engine.get(id)).children;
    expect(children.map((c) => `${c.workflow}:${c.status}`)).toEqual(['double:succeeded', 'flaky-child:failed', 'flaky-child:failed', 'flaky-child:succeeded']);
  });
});

describe('child tasks: usage', () => {
  it("engine.get adds up the model usage of every task below a task as usage.children (the task's own stays total)", async () => {
    const prices = { m: { input: 1, output: 2 } };
    const leaf = workflow(
      'usage-leaf',
      async (ctx) =>
        ctx.step('call', async (s) => {
          await ctx.usage(s, { model: 'm', inputTokens: 1_000_000, outputTokens: 500_000 });
          return 1;
        }),
      { prices },
    );
    const middle = workflow(
      'usage-middle',
      async (ctx) => {
        await ctx.step('call', async (s) => {
          await ctx.usage(s, { model: 'm', inputTokens: 100_000, outputTokens: 50_000 });
        });
        return ctx.child(leaf, undefined);
      },
      { prices },
    );
    const root = workflow('usage-root', async (ctx) => ctx.children(middle, [undefined, undefined]));
    const engine = makeEngine({ workflows: [root, middle, leaf] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(root);
    await engine.result(id);
    const info = await engine.get(id);
    expect(info.usage?.total.totalTokens).toBe(0);
    expect(info.usage?.children).toMatchObject({ totalTokens: 2 * 150_000 + 2 * 1_500_000, attempts: 4 });
    expect(info.usage?.children?.costUsd).toBeCloseTo(2 * 0.2 + 2 * 2, 9);
    const m = await engine.get(info.children[0]?.id as string);
    expect(m.usage?.total.totalTokens).toBe(150_000);
    expect(m.usage?.children).toMatchObject({ totalTokens: 1_500_000, attempts: 1 });
    const l = await engine.get(m.children[0]?.id as string);
    expect(l.usage?.children).toBeUndefined();
  });
});

describe('child tasks: identity', () => {
  it("a child's idempotency key derives from the parent's call: child:v1:<parent>:<name>#<occurrence>", async () => {
    const parent = workflow('keyed', async (ctx) => {
      const a = await ctx.startChild(double, { n: 1 }, { name: 'research' });
      const b = await ctx.startChild(double, { n: 2 }, { name: 'research' });
      const c = await ctx.startChild(double, { n: 3 });
      return [await a.result(), await b.result(), await c.result()];
    });
    const engine = makeEngine({ workflows: [parent, double] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    expect(await engine.result(id)).toEqual([2, 4, 6]);
    const keys = await Promise.all((await engine.get(id)).children.map(async (c) => (await engine.get(c.id)).idempotencyKey));
    expect(keys).toEqual([`child:v1:${id}:research#1`, `child:v1:${id}:research#2`, `child:v1:${id}:child:double#1`]);
  });
});

describe('child tasks: explain', () => {
  it('explains a parent waiting for its children by naming them', async () => {
    const release = { go: false };
    const slow = workflow('slow-2', async (ctx) =>
      ctx.step('poll', async () => {
        while (!release.go) await new Promise((r) => setTimeout(r, 5));
        return 1;
      }),
    );
    const parent = workflow('explained', async (ctx) => Promise.all([ctx.child(slow, undefined), ctx.child(slow, undefined)]));
    const engine = makeEngine({ workflows: [parent, slow] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'waiting');
    const [a, b] = (await engine.get(id)).children.map((c) => c.id);
    const { summary } = await engine.explain(id);
    // The two ends are named in the order the parent's waits were registered, which its two child
    // calls settle in: either order.
    expect([
      `Waiting for the first of: the end of child task ${a}; the end of child task ${b}.`,
      `Waiting for the first of: the end of child task ${b}; the end of child task ${a}.`,
    ]).toContain(summary);
    release.go = true;
    expect(await engine.result(id)).toEqual([1, 1]);
  });
});
