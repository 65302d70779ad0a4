// Tags and search: tasks are found by tags set at start or learnt during the run, by creation
// time, by the code of the error they failed with and by text, a page at a time; children inherit
// their parent's tags; deleting a task removes its tag rows.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const quotaError = (): Error => Object.assign(new Error('the tenant is over its quota'), { code: 'QUOTA_EXCEEDED' });

const quick = workflow('quick', async (ctx, input: { n: number }) => ctx.step('one', () => input.n));
const learns = workflow('learns', async (ctx, input: { tenant: string }) => {
  await ctx.setTags({ tenant: input.tenant, stage: 'parsed' });
  await ctx.step('work', () => 1);
  await ctx.setTags({ stage: null, model: 'small' });
  return ctx.child('quick', { n: 1 });
});
const quota = workflow(
  'quota',
  async (ctx) =>
    ctx.step('call', () => {
      throw quotaError();
    }),
  { retry: 1 },
);

const ids = (r: { tasks: Array<{ id: string }> }): string[] => r.tasks.map((t) => t.id);

describe(`tags and search (${TEST_STORE})`, () => {
  it('finds tasks by every tag given, newest first, a page at a time', async () => {
    const engine = makeEngine({ workflows: [quick] });
    const acme: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { id } = await engine.start(quick, { n: i }, { tags: { tenant: i % 2 ? 'globex' : 'acme', user: `u${i % 3}` } });
      if (i % 2 === 0) acme.push(id);
    }
    await engine.start(quick, { n: 99 });
    const all = await engine.list({ tags: { tenant: 'acme' } });
    expect(ids(all)).toEqual([...acme].reverse());
    expect(all.tasks[0]?.tags).toEqual({ tenant: 'acme', user: 'u0' });
    // Two tags: both must hold (acme tasks are i = 0, 2, 4, 6; user u0 is i = 0, 3, 6).
    expect(ids(await engine.list({ tags: { tenant: 'acme', user: 'u0' } }))).toEqual([acme[3], acme[0]]);
    // Paging through one tag: pages of 2 cover the four tasks once each, in order.
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await engine.list({ tags: { tenant: 'acme' }, limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...ids(page));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual([...acme].reverse());
    expect(ids(await engine.list({ tags: { tenant: 'initech' } }))).toEqual([]);
    // With other filters.
    expect(ids(await engine.list({ tags: { tenant: 'acme' }, status: 'succeeded' }))).toEqual([]);
    expect(ids(await engine.list({ tags: { tenant: 'acme' }, workflow: 'quick', status: 'pending' }))).toHaveLength(4);
  });

  it('merges tags learnt during the run, removes those set to null, and a child inherits them', async () => {
    const engine = makeEngine({ workflows: [learns, quick] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(learns, { tenant: 'acme' }, { tags: { source: 'api' } });
      await waitForStatus(engine, id, 'succeeded');
      const task = await engine.get(id);
      expect(task.tags).toEqual({ source: 'api', tenant: 'acme', model: 'small' });
      expect(ids(await engine.list({ tags: { tenant: 'acme', model: 'small' } }))).toContain(id);
      // The removed tag no longer matches.
      expect(ids(await engine.list({ tags: { stage: 'parsed' } }))).toEqual([]);
      const [child] = (await engine.list({ parent: id })).tasks;
      expect(child?.tags).toEqual({ source: 'api', tenant: 'acme', model: 'small' });
      expect(ids(await engine.list({ tags: { tenant: 'acme' }, workflow: 'quick' }))).toEqual([child?.id]);
    } finally {
      await worker.stop();
    }
  });

  it('engine.setTags changes an ended task tags; a bad tag or an unknown task is refused and changes nothing', async () => {
    const engine = makeEngine({ workflows: [quick] });
    const { id } = await engine.start(quick, { n: 1 }, { tags: { tenant: 'acme' } });
    expect(await engine.setTags(id, { reviewed: 'yes', tenant: null })).toEqual({ reviewed: 'yes' });
    expect(ids(await engine.list({ tags: { tenant: 'acme' } }))).toEqual([]);
    expect(ids(await engine.list({ tags: { reviewed: 'yes' } }))).toEqual([id]);
    const invalid = { code: ERROR_CODES.INVALID_ARGUMENT };
    await expect(engine.setTags(id, { '1bad': 'x' })).rejects.toMatchObject(invalid);
    await expect(engine.setTags(id, { ok: '' })).rejects.toMatchObject(invalid);
    await expect(engine.setTags(id, { ok: 5 as never })).rejects.toMatchObject(invalid);
    await expect(engine.setTags('no-such-task', { ok: 'x' })).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(engine.start(quick, { n: 1 }, { tags: { tenant: null } as never })).rejects.toMatchObject(invalid);
    await expect(engine.start(quick, { n: 1 }, { tags: ['acme'] as never })).rejects.toMatchObject(invalid);
    const many = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, 'v']));
    await expect(engine.setTags(id, many)).rejects.toMatchObject(invalid); // 1 + 32 > 32
    expect((await engine.get(id)).tags).toEqual({ reviewed: 'yes' });
    await expect(engine.list({ tags: { tenant: null } as never })).rejects.toMatchObject(invalid);
  });

  it('finds tasks by creation time, by the code of their error and by text', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const engine = makeEngine({ workflows: [quick, quota], clock });
    const early = (await engine.start(quick, { n: 1 }, { title: 'Quarterly report for Acme' })).id;
    await clock.advance('1h');
    const boundary = clock.now();
    const late = (await engine.start(quick, { n: 2 })).id;
    const failed = (await engine.start(quota, {})).id;
    const worker = await startWorker(engine, { workflows: ['quota'] });
    try {
      await waitForStatus(engine, failed, 'failed');
    } finally {
      await worker.stop();
    }
    expect(ids(await engine.list({ createdBefore: boundary }))).toEqual([early]);
    expect(ids(await engine.list({ createdAfter: new Date(boundary) }))).toEqual([failed, late]);
    expect(ids(await engine.list({ createdAfter: boundary - 1, createdBefore: boundary + 1 }))).toEqual([failed, late]);
    expect(ids(await engine.list({ failedWith: 'QUOTA_EXCEEDED' }))).toEqual([failed]);
    expect(ids(await engine.list({ failedWith: 'RATE_LIMITED' }))).toEqual([]);
    // Text: the title, the error's message, the input; case-insensitive; % and _ are plain characters.
    expect(ids(await engine.list({ text: 'quarterly REPORT' }))).toEqual([early]);
    expect(ids(await engine.list({ text: 'over its quota' }))).toEqual([failed]);
    expect(ids(await engine.list({ text: '"n":2' }))).toEqual([late]);
    expect(ids(await engine.list({ text: '%' }))).toEqual([]);
    expect(ids(await engine.list({ text: late.slice(0, 20) }))).toContain(late);
    const invalid = { code: ERROR_CODES.INVALID_ARGUMENT };
    await expect(engine.list({ createdAfter: 'yesterday' as never })).rejects.toMatchObject(invalid);
    await expect(engine.list({ failedWith: '' })).rejects.toMatchObject(invalid);
    await expect(engine.list({ text: '' })).rejects.toMatchObject(invalid);
  });

  it('deleting a task removes its tags from the index', async () => {
    const engine = makeEngine({ workflows: [quick] });
    const worker = await startWorker(engine);
    const a = (await engine.start(quick, { n: 1 }, { tags: { tenant: 'acme' } })).id;
    const b = (await engine.start(quick, { n: 2 }, { tags: { tenant: 'acme' } })).id;
    try {
      await waitForStatus(engine, a, 'succeeded');
      await waitForStatus(engine, b, 'succeeded');
    } finally {
      await worker.stop();
    }
    await engine.delete(a);
    expect(ids(await engine.list({ tags: { tenant: 'acme' } }))).toEqual([b]);
  });
});
