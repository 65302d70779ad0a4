// ctx.patched: a change of code in place. Tasks recorded before the change replay the old path;
// tasks that reach the marker on the new code take the new one, in every later replay too.
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { FAST, tempDbUrl, waitForStatus } from './support/engine.ts';

const v1 = () =>
  workflow('article', async (ctx, input: { title: string }) => {
    const draft = await ctx.step('draft', () => `draft of ${input.title}`);
    await ctx.waitForEvent('go');
    return ctx.step('publish', () => ({ draft, checked: false }));
  });

const v1Patched = (checks: string[]) =>
  workflow('article', async (ctx, input: { title: string }) => {
    const draft = await ctx.step('draft', () => `draft of ${input.title}`);
    let checked = false;
    if (await ctx.patched('add-fact-check')) checked = await ctx.step('fact-check', () => (checks.push(input.title), true));
    await ctx.waitForEvent('go');
    return ctx.step('publish', () => ({ draft, checked }));
  });

const unpatched = () =>
  workflow('article', async (ctx, input: { title: string }) => {
    const draft = await ctx.step('draft', () => `draft of ${input.title}`);
    const checked = await ctx.step('fact-check', () => true);
    await ctx.waitForEvent('go');
    return ctx.step('publish', () => ({ draft, checked }));
  });

async function withEngine<T>(url: string, wf: ReturnType<typeof v1>, fn: (e: Engine) => Promise<T>): Promise<T> {
  const engine = new Engine({ store: url, workflows: [wf] });
  try {
    await engine.worker({ ...FAST, parkAfterMs: 1, keepParked: 0 }).start(); // waits park at once, not kept: the signal replays the task
    return await fn(engine);
  } finally {
    await engine.close();
  }
}

describe('ctx.patched', () => {
  it('replays a task recorded before the change on the old path, and runs the new path for a task that reaches it on new code', async () => {
    const url = tempDbUrl();
    const old = await withEngine(url, v1(), async (e) => {
      const { id } = await e.start('article', { title: 'old' });
      await waitForStatus(e, id, 'waiting');
      return id;
    });
    const checks: string[] = [];
    await withEngine(url, v1Patched(checks), async (e) => {
      const { id: fresh } = await e.start('article', { title: 'new' });
      await waitForStatus(e, fresh, 'waiting');
      await e.signal(old, 'go');
      await e.signal(fresh, 'go');
      expect(await e.result(old, { timeout: '20s' })).toEqual({ draft: 'draft of old', checked: false });
      expect(await e.result(fresh, { timeout: '20s' })).toEqual({ draft: 'draft of new', checked: true });
      expect(checks).toEqual(['new']); // the fact check ran once, for the new task, not again on its replay
      expect((await e.get(fresh)).steps.map((s) => s.name)).toEqual(['draft', 'patch:add-fact-check', 'fact-check', 'go', 'publish']);
      expect((await e.get(old)).steps.map((s) => s.name)).toEqual(['draft', 'go', 'publish']);
    });
  });

  it('without the marker, the same change fails the old task with NON_DETERMINISM (what the marker is for)', async () => {
    const url = tempDbUrl();
    const old = await withEngine(url, v1(), async (e) => {
      const { id } = await e.start('article', { title: 'old' });
      await waitForStatus(e, id, 'waiting');
      return id;
    });
    await withEngine(url, unpatched(), async (e) => {
      await e.signal(old, 'go');
      const err = await e.result(old, { timeout: '20s' }).catch((x: unknown) => x);
      expect((err as { cause?: { code?: string } }).cause?.code).toBe('NON_DETERMINISM');
    });
  });

  it('refuses an id that is not 1-100 letters, digits, ".", "_", ":" or "-"', async () => {
    const bad = workflow('bad-patch', async (ctx) => ctx.patched('has space'));
    await withEngine(tempDbUrl(), bad as never, async (e) => {
      const { id } = await e.start(bad, {});
      const err = await e.result(id, { timeout: '20s' }).catch((x: unknown) => x);
      expect((err as { cause?: { code?: string; message?: string } }).cause).toMatchObject({ code: 'INVALID_ARGUMENT' });
    });
  });
});
