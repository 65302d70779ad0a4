// ctx.transaction: the user's SQL on the engine's own database commits in the same transaction as
// the step's checkpoint (SQLite here; PostgreSQL in the engine-on-postgres project).
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, NonRetryableError, workflow } from '../src/index.ts';
import { makeEngine, startWorker, tempDbUrl, transitionsOf, waitForStatus } from './support/engine.ts';
import { userTable } from './support/user-table.ts';

describe('ctx.transaction', () => {
  it('commits the rows with the checkpoint, and hands the result back in replay without running again', async () => {
    const url = tempDbUrl();
    const orders = userTable(url);
    let runs = 0;
    const wf = workflow('save-orders', async (ctx, input: { ids: number[] }) => {
      const saved = await ctx.transaction('save', async (tx) => {
        runs++;
        for (const id of input.ids) await tx.execute(`INSERT INTO ${orders.name} (id, total) VALUES (${orders.p(1)}, ${orders.p(2)})`, [id, id * 10]);
        const [row] = await tx.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${orders.name}`);
        return { saved: Number(row?.n) };
      });
      const go = await ctx.waitForEvent<string>('go');
      return { ...saved, go: go.timedOut ? null : go.payload };
    });
    const engine = makeEngine({ store: url, workflows: [wf] });
    await engine.ready();
    await orders.create('id INTEGER PRIMARY KEY, total INTEGER NOT NULL');
    await startWorker(engine);
    const task = await engine.start(wf, { ids: [1, 2, 3] });
    await waitForStatus(engine, task.id, 'waiting');
    expect(await orders.rows()).toEqual([
      { id: 1, total: 10 },
      { id: 2, total: 20 },
      { id: 3, total: 30 },
    ]);
    await engine.signal(task.id, 'go', 'now');
    expect(await task.result()).toEqual({ saved: 3, go: 'now' });
    expect(runs).toBe(1);
    const info = await engine.get(task.id);
    expect(info.steps[0]).toMatchObject({ name: 'save', kind: 'step', status: 'completed', attempts: 1, output: { saved: 3 } });
    expect(info.history.filter((e) => e.type === 'step:completed').map((e) => e.type === 'step:completed' && e.step.name)).toEqual(['save', 'go']);
  });

  it('rolls back the writes of a failed attempt and retries: the rows are written once', async () => {
    const url = tempDbUrl();
    const orders = userTable(url);
    const wf = workflow('flaky-save', async (ctx) =>
      ctx.transaction(
        'save',
        async (tx) => {
          // Had the first attempt's insert survived, this one would break the primary key.
          await tx.execute(`INSERT INTO ${orders.name} (id) VALUES (${orders.p(1)})`, [7]);
          if (attempts++ === 0) throw new Error('deadline exceeded');
          return 'saved';
        },
        { retry: { maxAttempts: 3, initialDelay: 1, maxDelay: 5 } },
      ),
    );
    let attempts = 0;
    const engine = makeEngine({ store: url, workflows: [wf] });
    await engine.ready();
    await orders.create('id INTEGER PRIMARY KEY');
    await startWorker(engine);
    const task = await engine.start(wf);
    expect(await task.result()).toBe('saved');
    expect(await orders.rows()).toEqual([{ id: 7 }]);
    expect((await engine.get(task.id)).steps[0]).toMatchObject({ status: 'completed', attempts: 2 });
  });

  it('fails the step for good with nothing written when the function keeps failing', async () => {
    const url = tempDbUrl();
    const orders = userTable(url);
    const wf = workflow('doomed-save', async (ctx) =>
      ctx.transaction('save', async (tx) => {
        await tx.execute(`INSERT INTO ${orders.name} (id) VALUES (1)`);
        throw new NonRetryableError('target table rejected the batch');
      }),
    );
    const engine = makeEngine({ store: url, workflows: [wf] });
    await engine.ready();
    await orders.create('id INTEGER PRIMARY KEY');
    await startWorker(engine);
    const task = await engine.start(wf);
    await expect(task.result()).rejects.toMatchObject({ code: ERROR_CODES.TASK_FAILED });
    expect(await orders.rows()).toEqual([]);
    const info = await engine.get(task.id);
    expect(info.steps[0]).toMatchObject({ name: 'save', status: 'failed', attempts: 1 });
    expect(info.status === 'failed' && info.error.message).toContain('target table rejected the batch');
  });

  it('rolls the writes back with a checkpoint the fence refuses (the lease moved on), and the next owner writes them once', async () => {
    const url = tempDbUrl();
    const orders = userTable(url);
    const tasks = url.startsWith('sqlite:') ? 'stepwise_tasks' : `"${new URL(url).searchParams.get('schema')}".tasks`;
    // On PostgreSQL a claim also copies the epoch to the task's head, where a checkpoint's fence reads it.
    const heads = url.startsWith('sqlite:') ? null : `"${new URL(url).searchParams.get('schema')}".task_heads`;
    let first = true;
    const wf = workflow('fenced-save', async (ctx) =>
      ctx.transaction('save', async (tx) => {
        await tx.execute(`INSERT INTO ${orders.name} (id) VALUES (1)`);
        if (first) {
          first = false;
          // As if another worker claimed the task meanwhile: its epoch moves on before our checkpoint.
          await tx.execute(`UPDATE ${tasks} SET epoch = epoch + 1 WHERE id = ${orders.p(1)}`, [ctx.taskId]);
          if (heads) await tx.execute(`UPDATE ${heads} SET epoch = epoch + 1 WHERE id = $1`, [ctx.taskId]);
        }
        return 'saved';
      }),
    );
    const engine = makeEngine({ store: url, workflows: [wf] });
    await engine.ready();
    await orders.create('id INTEGER PRIMARY KEY');
    await startWorker(engine, { leaseMs: 500 });
    const task = await engine.start(wf);
    expect(await task.result({ timeout: '20s' })).toBe('saved');
    expect(await orders.rows()).toEqual([{ id: 1 }]);
    const info = await engine.get(task.id);
    expect(transitionsOf(info).map((t) => t.event)).toEqual(['create', 'claim', 'reclaim', 'complete']);
    expect(info.steps[0]).toMatchObject({ status: 'completed', epoch: 2 });
  });

  it('refuses a transaction without a function: the task fails with INVALID_ARGUMENT', async () => {
    const wf = workflow('no-fn', async (ctx) => ctx.transaction('save', 'INSERT' as unknown as () => Promise<void>));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const task = await engine.start(wf);
    await expect(task.result()).rejects.toMatchObject({ code: ERROR_CODES.TASK_FAILED });
    const info = await engine.get(task.id);
    expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
  });
});
