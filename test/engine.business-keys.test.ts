// Steps with a business key (`ctx.step(name, fn, { key })`): the operation, not the task, is the
// identity, so a new task doing the same operation gets the recorded result instead of running it.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, NonRetryableError, hashKey, workflow, type IdempotencyTaskEvent, type TaskEvent } from '../src/index.ts';
import { gate, makeEngine, startWorker } from './support/engine.ts';
import { collectIdempotency } from './support/idempotency.ts';

const hitsOf = (history: TaskEvent[]): IdempotencyTaskEvent[] => history.filter((e): e is IdempotencyTaskEvent => e.type.startsWith('idempotency:'));

describe('steps with a business key', () => {
  it('returns the recorded result to a new task doing the same operation, without running the step again', async () => {
    const runs: string[] = [];
    const report = workflow('daily-report', async (ctx, input: { day: string }) => {
      const rows = await ctx.step(
        'write-report',
        ({ idempotencyKey }) => {
          runs.push(idempotencyKey);
          return { rows: 3, writtenBy: ctx.taskId };
        },
        { key: `report:${input.day}:daily` },
      );
      return rows;
    });
    const { observer, events } = collectIdempotency();
    const engine = makeEngine({ workflows: [report], observers: [observer] });
    await startWorker(engine);
    const first = await engine.start(report, { day: '2026-12-01' });
    expect(await first.result()).toEqual({ rows: 3, writtenBy: first.id });
    const second = await engine.start(report, { day: '2026-12-01' });
    expect(await second.result()).toEqual({ rows: 3, writtenBy: first.id });
    expect(runs).toEqual(['v1:report:2026-12-01:daily']);
    const info = await engine.get(second.id);
    expect(info.steps[0]).toMatchObject({ name: 'write-report', status: 'completed', attempts: 0 });
    expect(hitsOf(info.history)).toEqual([expect.objectContaining({ type: 'idempotency:hit', key: 'v1:report:2026-12-01:daily', step: 'write-report', ranByTask: first.id })]);
    expect(hitsOf((await engine.get(first.id)).history)).toEqual([]);
    expect(events.map((e) => [e.type, e.taskId])).toEqual([['hit', second.id]]);
    // Another day is another operation.
    const other = await engine.start(report, { day: '2026-12-02' });
    await other.result();
    expect(runs).toEqual(['v1:report:2026-12-01:daily', 'v1:report:2026-12-02:daily']);
  });

  it('takes the key from a function of the workflow input, with sensitive parts digested by hashKey', async () => {
    const keys: string[] = [];
    const wf = workflow('welcome', async (ctx, _input: { email: string }) =>
      ctx.step('send', ({ idempotencyKey }) => void keys.push(idempotencyKey), { key: (i: { email: string }) => `welcome:${hashKey(i.email)}` }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    await (await engine.start(wf, { email: 'Ada@example.com' })).result();
    await (await engine.start(wf, { email: 'Ada@example.com' })).result();
    await (await engine.start(wf, { email: 'bob@example.com' })).result();
    expect(keys).toEqual([`v1:welcome:${hashKey('Ada@example.com')}`, `v1:welcome:${hashKey('bob@example.com')}`]);
    expect(keys[0]).not.toContain('Ada');
    expect(hashKey('Ada@example.com')).toMatch(/^h:[0-9a-f]{32}$/);
    expect(hashKey({ a: 1, b: 2 })).toBe(hashKey({ b: 2, a: 1 }));
  });

  it('runs the step afresh under a new keyVersion (the step changed meaning)', async () => {
    let version = 1;
    const calls: string[] = [];
    const wf = workflow('sync-orders', async (ctx) => ctx.step('push', ({ idempotencyKey }) => calls.push(idempotencyKey), { key: 'orders:batch-7', keyVersion: version }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    await (await engine.start(wf)).result();
    await (await engine.start(wf)).result();
    version = 2;
    await (await engine.start(wf)).result();
    expect(calls).toEqual(['v1:orders:batch-7', 'v2:orders:batch-7']);
  });

  it('lets a later task run the operation again after a task failed it for good', async () => {
    let calls = 0;
    const wf = workflow('fragile', async (ctx) =>
      ctx.step(
        'charge',
        () => {
          calls++;
          if (calls === 1) throw new NonRetryableError('card declined');
          return 'charged';
        },
        { key: 'charge:order-77' },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    await expect((await engine.start(wf)).result()).rejects.toMatchObject({ code: ERROR_CODES.TASK_FAILED });
    expect((await engine.idempotency.get('v1:charge:order-77'))?.status).toBe('failed');
    expect(await (await engine.start(wf)).result()).toBe('charged');
    expect(calls).toBe(2);
  });

  it('makes a second task with the same key wait for the running one and share its result', async () => {
    const started = gate();
    const release = gate();
    let calls = 0;
    const wf = workflow('export', async (ctx) =>
      ctx.step(
        'export',
        async () => {
          calls++;
          started.open();
          await release.promise;
          return 'exported';
        },
        { key: 'export:2026-12' },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { concurrency: 4 });
    const a = await engine.start(wf);
    await started.promise;
    const b = await engine.start(wf);
    release.open();
    expect(await Promise.all([a.result(), b.result()])).toEqual(['exported', 'exported']);
    expect(calls).toBe(1);
  });

  it('fails the task with INVALID_ARGUMENT on a key that is empty, too long or not a string', async () => {
    const wf = workflow('bad-key', async (ctx, input: { key: unknown }) => ctx.step('s', () => 1, { key: input.key as string }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    for (const key of ['', 'x'.repeat(300), 42]) {
      const task = await engine.start(wf, { key });
      await expect(task.result()).rejects.toMatchObject({ code: ERROR_CODES.TASK_FAILED });
      const info = await engine.get(task.id);
      expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
    }
  });
});
