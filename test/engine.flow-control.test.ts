// Flow control on both stores: a limit per key (at most `limit` tasks of one key run at once,
// the others wait in order without holding a worker's slot, other keys run meanwhile) and
// priorities with ageing (higher first among due tasks, a lower one never starved), on the
// injectable clock.
import { describe, expect, it } from 'vitest';
import { openStore, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { gate, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

describe('limits per key', () => {
  it('runs one task of a key at a time, in start order, while another key runs beside it', async () => {
    const held = gate();
    const order: string[] = [];
    const running = new Map<string, number>();
    let most = 0;
    const wf = workflow(
      'per-user',
      async (ctx, input: { user: string; n: number }) =>
        ctx.step('work', async () => {
          const now = (running.get(input.user) ?? 0) + 1;
          running.set(input.user, now);
          most = Math.max(most, now);
          order.push(`${input.user}${input.n}`);
          if (input.user === 'a' && input.n === 1) await held.promise;
          running.set(input.user, (running.get(input.user) ?? 1) - 1);
          return input.n;
        }),
      { concurrency: { key: (input) => input.user, limit: 1 } },
    );
    const engine = makeEngine({ workflows: [wf] });
    const a: string[] = [];
    for (let n = 1; n <= 4; n++) a.push((await engine.start(wf, { user: 'a', n })).id);
    const b = await engine.start(wf, { user: 'b', n: 1 });
    expect((await engine.get(b.id)).status).toBe('pending');
    // Two slots: a1 takes one and holds it; a2..a4 wait without taking the other, which b1 gets.
    await startWorker(engine, { concurrency: 2 });
    await waitForStatus(engine, b.id, 'succeeded');
    for (const id of a.slice(1)) expect((await engine.get(id)).status).toBe('pending');
    expect((await engine.explain(a[1] as string)).summary).toMatch(/concurrency key "a" is at its limit \(1 of 1 running\)/);
    held.open();
    for (const id of a) await waitForStatus(engine, id, 'succeeded');
    expect(most).toBe(1);
    expect(order.filter((x) => x.startsWith('a'))).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it('lets `limit` tasks of a key run at once and no more', async () => {
    const held = gate();
    let now = 0;
    let most = 0;
    const wf = workflow(
      'per-tenant',
      async (ctx, _input: { tenant: string }) =>
        ctx.step('work', async () => {
          most = Math.max(most, ++now);
          await held.promise;
          now--;
        }),
      { concurrency: { key: (input) => input.tenant, limit: 2 } },
    );
    const engine = makeEngine({ workflows: [wf] });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await engine.start(wf, { tenant: 't' })).id);
    await startWorker(engine, { concurrency: 8 });
    await waitForStatus(engine, ids[1] as string, 'running');
    await waitForStatus(engine, ids[0] as string, 'running');
    const statuses = await Promise.all(ids.map(async (id) => (await engine.get(id)).status));
    expect(statuses.filter((s) => s === 'running')).toHaveLength(2);
    held.open();
    for (const id of ids) await waitForStatus(engine, id, 'succeeded');
    expect(most).toBe(2);
  });

  it('explain says a task waits behind the tasks of its key queued before it', async () => {
    const wf = workflow('queued', async (ctx, _input: { tenant: string }) => ctx.step('work', () => null), { concurrency: { key: (input) => input.tenant, limit: 2 } });
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await engine.start(wf, { tenant: 'q' })).id);
    // A live worker elsewhere, so that explain speaks of the queue rather than of the missing worker.
    const store = await openStore(url);
    await store.recordPresence({ workerId: 'elsewhere', served: [{ name: 'queued', version: '1' }], at: Date.now() }, 0);
    await store.close();
    expect((await engine.explain(ids[2] as string)).summary).toMatch(/concurrency key "q" has 2 task\(s\) queued before it \(0 of 2 running\): it runs in its turn/);
    expect((await engine.explain(ids[1] as string)).summary).toMatch(/^Pending and due: the next worker serving "queued"/);
  });

  it('lets go of its place while it waits for an event, and a cancel of a running task frees its place', async () => {
    const held = gate();
    const wf = workflow(
      'waits',
      async (ctx, input: { user: string; wait?: boolean; hold?: boolean }) => {
        if (input.wait) await ctx.waitForEvent('go');
        return ctx.step('work', async ({ signal }) => {
          if (input.hold) await Promise.race([held.promise, new Promise((r) => signal.addEventListener('abort', r))]);
          return input.user;
        });
      },
      { concurrency: { key: (input) => input.user, limit: 1 } },
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { concurrency: 4 });
    const waiting = await engine.start(wf, { user: 'u', wait: true });
    await waitForStatus(engine, waiting.id, 'waiting');
    // The waiting task holds no place: the next task of its key runs.
    const holding = await engine.start(wf, { user: 'u', hold: true });
    await waitForStatus(engine, holding.id, 'running');
    const queued = await engine.start(wf, { user: 'u' });
    await engine.signal(waiting.id, 'go', null);
    // Both wait behind the running one; its cancel frees the place for them, one after the other.
    expect((await engine.get(queued.id)).status).toBe('pending');
    await engine.cancel(holding.id);
    await waitForStatus(engine, waiting.id, 'succeeded');
    await waitForStatus(engine, queued.id, 'succeeded');
    expect((await engine.get(holding.id)).status).toBe('cancelled');
    held.open();
  });

  it('holds a limit per key beside a workflow with a number cap served by the same worker', async () => {
    const held = gate();
    let now = 0;
    let most = 0;
    const capped = workflow('capped', async (ctx) => ctx.step('work', () => 'capped'), { concurrency: 1 });
    const keyed = workflow(
      'keyed-beside-cap',
      async (ctx, _input: { user: string }) =>
        ctx.step('work', async () => {
          most = Math.max(most, ++now);
          await held.promise;
          now--;
        }),
      { concurrency: { key: (input) => input.user, limit: 1 } },
    );
    const engine = makeEngine({ workflows: [capped, keyed] });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await engine.start(keyed, { user: 'u' })).id);
    const c = await engine.start(capped, {});
    await startWorker(engine, { concurrency: 4 });
    await waitForStatus(engine, c.id, 'succeeded');
    await waitForStatus(engine, ids[0] as string, 'running');
    expect((await engine.get(ids[1] as string)).status).toBe('pending');
    held.open();
    for (const id of ids) await waitForStatus(engine, id, 'succeeded');
    expect(most).toBe(1);
  });

  it('shows the key and priority on the task, and a debounced start takes them from its last input', async () => {
    const wf = workflow('per-user-debounced', async (_ctx, input: { user: string }) => input.user, { concurrency: { key: (input) => input.user, limit: 1 } });
    const engine = makeEngine({ workflows: [wf] });
    const opts = { debounce: { key: 'd', period: '1h' } };
    const { id } = await engine.start(wf, { user: 'a' }, opts);
    expect(await engine.get(id)).toMatchObject({ concurrencyKey: 'a', priority: 0 });
    await engine.start(wf, { user: 'b' }, { ...opts, priority: 7 });
    expect(await engine.get(id)).toMatchObject({ input: { user: 'b' }, concurrencyKey: 'b', priority: 7 });
  });

  it('refuses a bad limit, a key that is not a function and a key function that returns no string', async () => {
    expect(() => workflow('bad-limit', async () => 1, { concurrency: { key: () => 'k', limit: 0 } })).toThrow(/concurrency\.limit must be an integer ≥ 1/);
    expect(() => workflow('bad-key', async () => 1, { concurrency: { key: 'user' as never, limit: 1 } })).toThrow(/concurrency\.key must be a function/);
    expect(() => workflow('bad-extra', async () => 1, { concurrency: { key: () => 'k', limit: 1, scope: 'x' } as never })).toThrow(/unknown concurrency option "scope"/);
    const wf = workflow('numeric-key', async () => 1, { concurrency: { key: (input: { n: number }) => input.n as unknown as string, limit: 1 } });
    const engine = makeEngine({ workflows: [wf] });
    await expect(engine.start(wf, { n: 3 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/concurrency\.key must return a string/) as unknown });
  });
});

describe('priorities', () => {
  it('claims higher priority first among due tasks, from the start option or the workflow default', async () => {
    const clock = new ManualClock();
    const order: string[] = [];
    const wf = workflow('jobs', async (ctx, input: { name: string }) => ctx.step('run', () => void order.push(input.name)));
    const urgent = workflow('urgent-jobs', async (ctx, input: { name: string }) => ctx.step('run', () => void order.push(input.name)), { priority: 5 });
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf, urgent], clock });
    await engine.start(wf, { name: 'low' });
    await engine.start(wf, { name: 'high' }, { priority: 10 });
    await engine.start(urgent, { name: 'workflow-default' });
    const last = await engine.startMany([{ workflow: wf, input: { name: 'mid' }, priority: 3 }]);
    // A live worker of "jobs" elsewhere (recorded as a running worker records itself), so that
    // explain speaks of the queue rather than of the missing worker.
    const store = await openStore(url);
    await store.recordPresence({ workerId: 'elsewhere', served: [{ name: 'jobs', version: '1' }], at: Date.now() }, 0);
    await store.close();
    expect((await engine.explain((last[0] as { id: string }).id)).summary).toMatch(/waiting: 2 due task\(s\) of higher priority go first/);
    await startWorker(engine, { concurrency: 1, claimBatch: 1 });
    await waitForStatus(engine, (last[0] as { id: string }).id, 'succeeded');
    await expect.poll(() => order.length).toBe(4);
    expect(order).toEqual(['high', 'workflow-default', 'mid', 'low']);
  });

  it('ages: a low-priority task that has waited longer than the priority gap goes before newer high-priority work', async () => {
    const clock = new ManualClock();
    const order: string[] = [];
    const wf = workflow('aged', async (ctx, input: { name: string }) => ctx.step('run', () => void order.push(input.name)));
    const engine = makeEngine({ workflows: [wf], clock });
    await engine.start(wf, { name: 'old-low' });
    // Priority 12 counts as 12 s of waiting: started 9 s after it, it goes first.
    await clock.advance('9s');
    await engine.start(wf, { name: 'newer-high' }, { priority: 12 });
    // Priority 10, started 11 s after it: still behind it.
    await clock.advance('2s');
    await engine.start(wf, { name: 'new-high' }, { priority: 10 });
    await startWorker(engine, { concurrency: 1, claimBatch: 1 });
    await expect.poll(() => order.length).toBe(3);
    expect(order).toEqual(['newer-high', 'old-low', 'new-high']);
  });

  it('refuses a priority outside 0..1000 or not an integer, at definition and at start', async () => {
    expect(() => workflow('bad-priority', async () => 1, { priority: 1001 })).toThrow(/priority must be an integer from 0 to 1000/);
    const wf = workflow('prio', async () => 1);
    const engine = makeEngine({ workflows: [wf] });
    await expect(engine.start(wf, {}, { priority: 1.5 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/engine\.start\(\): priority must be an integer from 0 to 1000/) as unknown,
    });
    await expect(engine.start(wf, {}, { priority: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.startMany([{ workflow: wf, priority: '9' as never }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
