import { describe, expect, it } from 'vitest';
import { Engine, TaskCancelledError, openStore, workflow } from '../src/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

/** A child whose step runs until its signal fires; it records what it saw. */
function blockingChild(name: string, seen: Map<string, string>) {
  return workflow(name, async (ctx, input: { label: string }) => {
    ctx.onCancel(async () => {
      await ctx.step('cleanup', () => void seen.set(`${input.label}:cleanup`, 'done'));
    });
    await ctx.step(
      'generate',
      ({ signal }) =>
        new Promise((_, reject) => {
          seen.set(`${input.label}:started`, 'yes');
          signal.addEventListener('abort', () => {
            seen.set(`${input.label}:aborted`, (signal.reason as Error).name);
            reject(signal.reason as Error);
          });
        }),
    );
  });
}

describe('child tasks: cancel cascade', () => {
  it('cancelling the parent cancels its children and grandchildren; each in-flight step gets its signal; the parent ends last', async () => {
    const seen = new Map<string, string>();
    const leaf = blockingChild('leaf', seen);
    const middle = workflow('middle', async (ctx, input: { label: string }) => {
      const h = await ctx.startChild(leaf, { label: `${input.label}/leaf` });
      await ctx.step(
        'work',
        ({ signal }) =>
          new Promise((_, reject) => {
            seen.set(`${input.label}:started`, 'yes');
            signal.addEventListener('abort', () => {
              seen.set(`${input.label}:aborted`, (signal.reason as Error).name);
              reject(signal.reason as Error);
            });
          }),
      );
      return h.result();
    });
    const root = workflow('root', async (ctx) => Promise.all([ctx.child(middle, { label: 'm' }), ctx.child(leaf, { label: 'l' })]));
    const engine = makeEngine({ workflows: [root, middle, leaf] });
    await startWorker(engine, { concurrency: 8 });
    const { id } = await engine.start(root);
    await eventually(() => ['m:started', 'l:started', 'm/leaf:started'].every((k) => seen.has(k)), 10_000, 'every descendant running');
    await waitForStatus(engine, id, 'waiting');
    await engine.cancel(id, { reason: 'user stop' });
    await expect(engine.result(id)).rejects.toBeInstanceOf(TaskCancelledError);
    expect(seen.get('m:aborted')).toBe('TaskCancelledError');
    expect(seen.get('l:aborted')).toBe('TaskCancelledError');
    expect(seen.get('m/leaf:aborted')).toBe('TaskCancelledError');
    expect(seen.get('l:cleanup')).toBe('done');
    expect(seen.get('m/leaf:cleanup')).toBe('done');
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    const tree = [...info.children];
    for (const c of info.children) tree.push(...(await engine.get(c.id)).children);
    expect(tree).toHaveLength(3);
    for (const c of tree) {
      const t = await engine.get(c.id);
      expect(t.status).toBe('cancelled');
      // Every descendant ended before the parent did.
      expect(t.finishedAt as number).toBeLessThanOrEqual(info.finishedAt as number);
      expect(t.cancelReason).toContain(`was cancelled: `);
    }
  });

  it('a parent that returns with a child still running cancels it (onParentEnd: cancel, the default) and ends after it', async () => {
    const seen = new Map<string, string>();
    const leaf = blockingChild('leaf-2', seen);
    const parent = workflow('leaves-early', async (ctx) => {
      const h = await ctx.startChild(leaf, { label: 'c' });
      await ctx.step('wait-until-child-runs', async () => {
        while (!seen.has('c:started')) await new Promise((r) => setTimeout(r, 5));
      });
      return h.id;
    });
    const engine = makeEngine({ workflows: [parent, leaf] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(parent);
    const childId = await engine.result<string>(id);
    const child = await engine.get(childId);
    expect(child.status).toBe('cancelled');
    expect(seen.get('c:aborted')).toBe('TaskCancelledError');
    expect(child.finishedAt as number).toBeLessThanOrEqual((await engine.get(id)).finishedAt as number);
  });

  it("a child started with onParentEnd: 'abandon' keeps running after its parent ends", async () => {
    const release = { go: false };
    const slow = workflow('slow', async (ctx) =>
      ctx.step('poll', async () => {
        while (!release.go) await new Promise((r) => setTimeout(r, 5));
        return 'finished alone';
      }),
    );
    const parent = workflow('fire-and-forget', async (ctx) => (await ctx.startChild(slow, undefined, { onParentEnd: 'abandon' })).id);
    const engine = makeEngine({ workflows: [parent, slow] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(parent);
    const childId = await engine.result<string>(id);
    expect((await engine.get(childId)).status).not.toBe('cancelled');
    release.go = true;
    expect(await engine.result(childId)).toBe('finished alone');
  });

  it('a parent that received the end of each of its children ends without looking them up again; one it did not await is still cancelled', async () => {
    const inner = await openStore(tempDbUrl());
    const lookups: number[] = [];
    // Counts the reads of a parent's children (the parent's end lists those still live).
    const store = spyStore(inner, {
      listTasks: (list) => (q) => {
        if (q.parent) lookups.push(1);
        return list(q);
      },
    });
    const seen = new Map<string, string>();
    const leaf = blockingChild('leaf-4', seen);
    const quick = workflow('quick', async (ctx, input: { n: number }) => ctx.step('one', () => input.n));
    const awaited = workflow('awaits-all', async (ctx) => {
      const both = await ctx.children(quick, [{ n: 1 }, { n: 2 }]);
      const h = await ctx.startChild(quick, { n: 3 });
      return [...both, await h.result()];
    });
    const leaves = workflow('leaves-one', async (ctx) => {
      const h = await ctx.startChild(leaf, { label: 'd' });
      await ctx.child(quick, { n: 4 });
      await ctx.step('wait-until-child-runs', async () => {
        while (!seen.has('d:started')) await new Promise((r) => setTimeout(r, 5));
      });
      return h.id;
    });
    try {
      const engine = new Engine({ store, workflows: [awaited, leaves, quick, leaf] });
      try {
        await startWorker(engine, { concurrency: 4 });
        const a = await engine.start(awaited);
        expect(await engine.result(a.id)).toEqual([1, 2, 3]);
        expect(lookups).toEqual([]);
        const b = await engine.start(leaves);
        const childId = await engine.result<string>(b.id);
        expect((await engine.get(childId)).status).toBe('cancelled');
        expect(lookups.length).toBeGreaterThan(0);
      } finally {
        await engine.close();
      }
    } finally {
      await inner.close();
    }
  });

  it('a failing parent cancels its other running children before it ends failed', async () => {
    const seen = new Map<string, string>();
    const leaf = blockingChild('leaf-3', seen);
    const bad = workflow('bad', async () => {
      throw new Error('nope');
    });
    const parent = workflow('one-fails', async (ctx) => {
      const running = await ctx.startChild(leaf, { label: 'x' });
      await ctx.step('wait-until-child-runs', async () => {
        while (!seen.has('x:started')) await new Promise((r) => setTimeout(r, 5));
      });
      await ctx.child(bad, undefined);
      return running.result();
    });
    const engine = makeEngine({ workflows: [parent, leaf, bad] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    const leafChild = info.children.find((c) => c.workflow === 'leaf-3');
    expect(leafChild?.status).toBe('cancelled');
    expect(seen.get('x:aborted')).toBe('TaskCancelledError');
  });
});

describe('child tasks: pause and resume of a subtree', () => {
  it('pause({ subtree: true }) pauses the task and every live task below it; resume({ subtree: true }) lets them all go on', async () => {
    const release = { go: false };
    const leaf = workflow('pausable-leaf', async (ctx) => {
      await ctx.step('wait', async () => {
        while (!release.go) await new Promise((r) => setTimeout(r, 5));
      });
      return ctx.step('after', () => 'leaf done');
    });
    const middle = workflow('pausable-middle', async (ctx) => ctx.child(leaf, undefined));
    const root = workflow('pausable-root', async (ctx) => ctx.children(middle, [undefined, undefined]));
    const engine = makeEngine({ workflows: [root, middle, leaf] });
    await startWorker(engine, { concurrency: 8 });
    const { id } = await engine.start(root);
    await eventually(async () => (await engine.count({ workflow: 'pausable-leaf', status: 'running' })).running === 2, 10_000, 'both leaves running');
    await expect(engine.pause(id, { subtree: 'yes' } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await engine.pause(id, { subtree: true });
    release.go = true;
    // Every task of the tree ends paused: the waiting ones at once, the leaves at their next step.
    const tree = async (): Promise<string[]> => {
      const out: string[] = [];
      const walk = async (task: string): Promise<void> => {
        const t = await engine.get(task, { history: false });
        out.push(`${t.workflow}:${t.status}`);
        for (const c of t.children) await walk(c.id);
      };
      await walk(id);
      return out;
    };
    await eventually(async () => (await tree()).every((s) => s.endsWith(':paused')), 10_000, 'the whole tree paused');
    expect(await tree()).toHaveLength(5);
    await engine.resume(id, { subtree: true });
    expect(await engine.result(id)).toEqual(['leaf done', 'leaf done']);
  });
});
