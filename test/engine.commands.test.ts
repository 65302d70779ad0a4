import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyConflictError, NonRetryableError, InvalidArgumentError, InvalidInputError, TaskNotFoundError, WorkflowNotFoundError, workflow } from '../src/index.ts';
import { TEST_STORE, gate, makeEngine, startWorker, tempDbUrl, waitForStatus, transitionsOf } from './support/engine.ts';
import { Engine } from '../src/index.ts';

const echo = workflow('echo', async (_ctx, input: unknown) => input);

describe('engine commands', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('returns the existing task for a repeated idempotency key instead of creating a second', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const a = await engine.start('echo', { x: 1, y: [2] }, { idempotencyKey: 'article-8001' });
    const b = await engine.start('echo', { y: [2], x: 1 }, { idempotencyKey: 'article-8001' });
    expect(a.created).toBe(true);
    expect(b).toEqual({ ...a, created: false });
    expect((await engine.list()).tasks).toHaveLength(1);
  });

  it('deduplicates concurrent starts with the same key', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const results = await Promise.all(Array.from({ length: 20 }, () => engine.start('echo', 1, { idempotencyKey: 'k' })));
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });

  it('refuses the same key with a different input or workflow', async () => {
    const other = workflow('other', async () => null);
    const engine = makeEngine({ workflows: [echo, other] });
    await engine.start('echo', { x: 1 }, { idempotencyKey: 'k1' });
    await expect(engine.start('echo', { x: 2 }, { idempotencyKey: 'k1' })).rejects.toThrow(IdempotencyConflictError);
    await expect(engine.start('other', { x: 1 }, { idempotencyKey: 'k1' })).rejects.toThrow(/runs workflow "echo", not "other"/);
  });

  it('gives typed errors with codes for unknown workflows, unknown ids and malformed input', async () => {
    const schema = {
      parse: (v: unknown) => {
        if (typeof (v as { topic?: unknown })?.topic !== 'string') throw new Error('topic must be a string');
        return v;
      },
    };
    const strict = workflow('strict', async () => null, { input: schema });
    const engine = makeEngine({ workflows: [echo, strict] });
    const unknown = await engine.start('ecoh', {}).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(WorkflowNotFoundError);
    expect((unknown as WorkflowNotFoundError).code).toBe('WORKFLOW_NOT_FOUND');
    expect((unknown as Error).message).toContain('Known workflows: echo, strict');
    await expect(engine.get('nope')).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(engine.cancel('nope')).rejects.toThrow(TaskNotFoundError);
    await expect(engine.start('echo', { when: new Date() })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(engine.start('strict', { topic: 3 })).rejects.toThrow(InvalidInputError);
    await expect(engine.start('strict', { topic: 3 })).rejects.toThrow(/topic must be a string/);
    await expect(engine.list({ status: 'done' as never })).rejects.toThrow(InvalidArgumentError);
    await expect(engine.start('echo', 1, { idempotencyKey: '' })).rejects.toThrow(InvalidArgumentError);
    const { id } = await engine.start('echo', 1);
    await expect(engine.signal(id, 'go', 1, { idempotencyKey: {} as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.signal(id, 'a|b', 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.cancel(id, { reason: { why: 1 } as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((await engine.get(id)).status).toBe('pending'); // bad input left the task alone
    await engine.cancel(id);
    expect((await engine.list()).tasks).toHaveLength(1); // nothing was created by bad input
  });

  it('knows workflows registered by workers in the database even without the code', async () => {
    const url = tempDbUrl();
    const withCode = new Engine({ store: url, workflows: [echo] });
    const w = withCode.worker({ pollIntervalMs: 20 });
    await w.start();
    const cli = new Engine({ store: url }); // like the CLI: no workflow code loaded
    try {
      const { id } = await cli.start('echo', { hello: 'world' });
      expect(await cli.result(id)).toEqual({ hello: 'world' });
      await expect(cli.start('missing', {})).rejects.toThrow(/Unknown workflow "missing". Known workflows: echo/);
    } finally {
      await cli.close();
      await withCode.close();
    }
  });

  it('lists newest first, filters by status and workflow, and pages with a cursor', async () => {
    const other = workflow('other', async () => null);
    const engine = makeEngine({ workflows: [echo, other] });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await engine.start(i % 2 ? 'other' : 'echo', i)).id);
    await engine.cancel(ids[0] as string);
    const page1 = await engine.list({ limit: 3 });
    const page2 = await engine.list({ limit: 3, cursor: page1.nextCursor as string });
    const page3 = await engine.list({ limit: 3, cursor: page2.nextCursor as string });
    expect([...page1.tasks, ...page2.tasks, ...page3.tasks].map((t) => t.id)).toEqual([...ids].reverse());
    expect(page3.nextCursor).toBeNull();
    expect((await engine.list({ workflow: 'other' })).tasks).toHaveLength(3);
    expect((await engine.list({ status: 'cancelled' })).tasks.map((t) => t.id)).toEqual([ids[0]]);
    expect((await engine.list({ status: ['pending', 'cancelled'] })).tasks).toHaveLength(7);
  });

  it('pauses a running task at the next step boundary and resumes it', async () => {
    const inStep = gate();
    const release = gate();
    const wf = workflow('pausable', async (ctx) => {
      await ctx.step('one', async () => {
        inStep.open();
        await release.promise;
        return 1;
      });
      return ctx.step('two', () => 2);
    });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const { id } = await engine.start('pausable');
    await inStep.promise;
    const p = await engine.pause(id);
    expect(p.status).toBe('running');
    expect(p.pauseRequested).toBe(true);
    await expect(engine.pause(id)).rejects.toThrow(/running \(pause requested\)/);
    release.open();
    await waitForStatus(engine, id, 'paused');
    expect(worker.inFlight).toBe(0);
    const steps = (await engine.get(id)).steps;
    expect(steps.map((s) => s.name)).toEqual(['one']);
    expect((await engine.explain(id)).legalEvents).toEqual(['cancel', 'resume']);
    await engine.resume(id);
    expect(await engine.result(id)).toBe(2);
  });

  it('withdraws a pause request that the run has not reached yet', async () => {
    const inStep = gate();
    const release = gate();
    const wf = workflow('withdraw', async (ctx) => {
      await ctx.step('one', async () => {
        inStep.open();
        await release.promise;
      });
      return ctx.step('two', () => 'done');
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('withdraw');
    await inStep.promise;
    await engine.pause(id);
    const resumed = await engine.resume(id);
    expect(resumed.status).toBe('running');
    expect(resumed.pauseRequested).toBe(false);
    release.open();
    expect(await engine.result(id)).toBe('done');
    expect(transitionsOf(await engine.get(id)).map((h) => h.event)).toEqual(['create', 'claim', 'pause', 'resume', 'complete']);
  });

  it('delivers signals sent before and after the task waits for them, once per idempotency key', async () => {
    const wf = workflow('approval-ish', async (ctx) => {
      const first = await ctx.waitForEvent<{ ok: boolean }>('early');
      const second = await ctx.waitForEvent<string>('late', { timeout: '1h' });
      return { first, second };
    });
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start('approval-ish');
    expect(await engine.signal(id, 'early', { ok: true }, { idempotencyKey: 'e1' })).toMatchObject({ created: true, delivered: 'queued' });
    expect(await engine.signal(id, 'early', { ok: true }, { idempotencyKey: 'e1' })).toMatchObject({ created: false, delivered: 'queued' });
    // The same key with another payload is not the same signal: the sender is told.
    await expect(engine.signal(id, 'early', { ok: false }, { idempotencyKey: 'e1' })).rejects.toMatchObject({ code: 'CONFLICT', recorded: { name: 'early', payload: { ok: true } } });
    await startWorker(engine);
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.explain(id)).summary).toMatch(/Waiting for event "late"/);
    await engine.signal(id, 'late', 'hello');
    expect(await engine.result(id)).toEqual({
      first: { timedOut: false, name: 'early', payload: { ok: true } },
      second: { timedOut: false, name: 'late', payload: 'hello' },
    });
    await expect(engine.signal(id, 'late', 'again')).rejects.toMatchObject({ code: 'ILLEGAL_TRANSITION' });
    // A signal accepted with a key keeps its answer after the task finished.
    expect(await engine.signal(id, 'early', { ok: true }, { idempotencyKey: 'e1' })).toMatchObject({ created: false, delivered: 'consumed' });
  });

  it('recovers a task failed by a bad signal: a corrected signal sent to the failed task replaces it on retry', async () => {
    const seen: unknown[] = [];
    const wf = workflow('order', async (ctx) => {
      const data = await ctx.waitForEvent<{ qty?: number }>('data');
      return ctx.step('price', () => {
        const payload = data.timedOut ? null : data.payload;
        seen.push(payload);
        if (typeof payload?.qty !== 'number') throw new NonRetryableError('qty missing');
        return payload.qty * 10;
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'data', { qty: 'three' });
    await waitForStatus(engine, id, 'failed');
    // Retried as it is, the task receives the same payload again and fails the same way.
    await engine.retry(id);
    await waitForStatus(engine, id, 'failed');
    expect(seen).toEqual([{ qty: 'three' }, { qty: 'three' }]);
    // A corrected signal is accepted by the failed task and replaces the bad one on retry.
    expect(await engine.signal(id, 'data', { qty: 3 }, { by: 'support' })).toMatchObject({ created: true, delivered: 'queued' });
    await engine.retry(id, { by: 'support' });
    expect(await engine.result(id, { timeout: '10s' })).toBe(30);
    expect(seen).toEqual([{ qty: 'three' }, { qty: 'three' }, { qty: 3 }]);
    const info = await engine.get(id);
    const retry = info.history.filter((e) => e.type === 'transition' && e.event === 'retry').pop();
    expect(retry?.type === 'transition' && retry.detail).toMatchObject({ fromStep: 'data', replacedSignal: true });
    expect(info.history.map((e) => e.seq)).toEqual(info.history.map((_, i) => i + 1));
  });

  it("refuses a signal payload that fails the workflow's declared schema before it is stored", async () => {
    const decision = z.object({ approved: z.boolean(), by: z.string() });
    const wf = workflow('review', async (ctx) => ctx.waitForEvent<z.infer<typeof decision>>('decision'), { signals: { decision } });
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf, undefined);
    const bad = await engine.signal(id, 'decision', { approved: 'yes' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'INVALID_INPUT' });
    expect((bad as Error).message).toMatch(/payload of signal "decision" to task .* fails its schema, and was not sent/);
    expect((await engine.get(id)).history.some((e) => e.type === 'signal:received')).toBe(false);
    expect(await engine.signal(id, 'decision', { approved: true, by: 'ann' })).toMatchObject({ created: true });
    await startWorker(engine);
    expect(await engine.result(id)).toEqual({ timedOut: false, name: 'decision', payload: { approved: true, by: 'ann' } });
    expect(() => workflow('w', async () => 1, { signals: { x: 'nope' as never } })).toThrow(/signals.x must be a schema/);
  });

  it('says whether a signal reached a waiting task or was queued, and refuses one nothing waits for when asked to', async () => {
    const wf = workflow('decide', async (ctx) => ctx.waitForEvent<string>(['approve', 'reject']));
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf, undefined);
    // Pending: nothing waits yet, so a strict sender is refused and a plain one is queued.
    await expect(engine.signal(id, 'approve', 'x', { requireWaiting: true })).rejects.toMatchObject({ code: 'CONFLICT' });
    await startWorker(engine);
    await waitForStatus(engine, id, 'waiting');
    const typo = await engine.signal(id, 'aprove', 'yes', { requireWaiting: true }).catch((e: unknown) => e);
    expect(typo).toMatchObject({ code: 'CONFLICT', recorded: { status: 'waiting', waitingFor: ['approve', 'reject'] } });
    expect((typo as Error).message).toContain('it waits for "approve", "reject"');
    expect((await engine.get(id)).history.some((e) => e.type === 'signal:received')).toBe(false);
    expect(await engine.signal(id, 'approve', 'yes', { requireWaiting: true, by: 'editor' })).toEqual({ created: true, delivered: 'waiting', status: 'waiting' });
    expect(await engine.result(id)).toEqual({ timedOut: false, name: 'approve', payload: 'yes' });
    const received = (await engine.get(id)).history.find((e) => e.type === 'signal:received');
    expect(received).toMatchObject({ name: 'approve', actor: { kind: 'user', id: 'editor' } });
  });

  it('result() rejects with a timeout error when asked to wait less than the task takes', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const { id } = await engine.start('echo', 1);
    await expect(engine.result(id, { timeout: 50 })).rejects.toMatchObject({ code: 'TIMEOUT' });
  });
});

describe('workflow versions', () => {
  it('runs a task only on workers that serve its version, or declare it compatible', async () => {
    const url = tempDbUrl();
    const v1 = workflow('versioned', async (ctx) => ctx.step('which', () => 'v1'), { version: 1 });
    const v2 = workflow('versioned', async (ctx) => ctx.step('which', () => 'v2'), { version: 2 });
    const old = new Engine({ store: url, workflows: [v1] });
    const current = new Engine({ store: url, workflows: [v2] });
    try {
      const a = await old.start(v1); // started under version 1
      const b = await current.start(v2);
      const w2 = current.worker({ pollIntervalMs: 20 });
      await w2.start();
      expect(await current.result(b.id)).toBe('v2');
      // A task started later runs: the v2 worker claimed again, and left the v1 task alone.
      const c = await current.start(v2);
      expect(await current.result(c.id)).toBe('v2');
      expect((await current.get(a.id)).status).toBe('pending');
      expect((await current.explain(a.id)).summary).toMatch(/started under version 1 of "versioned" and live workers serve only version\(s\) 2/);
      const v3 = workflow('versioned', async (ctx) => ctx.step('which', () => 'v3'), { version: 3, compatibleVersions: [1] });
      const next = new Engine({ store: url, workflows: [v3] });
      try {
        const w3 = next.worker({ pollIntervalMs: 20 });
        await w3.start();
        expect(await next.result(a.id)).toBe('v3'); // declared compatible: runs the v1 task
      } finally {
        await next.close();
      }
    } finally {
      await old.close();
      await current.close();
    }
  });
});
