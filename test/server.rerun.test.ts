// Re-run and fork over HTTP: POST /api/tasks/:id/retry takes fromStep (required for a succeeded or
// cancelled task), POST /api/tasks/:id/fork makes the fork (201); both need the operate right; the
// dashboard shows the step buttons to an operator only, and a fork's page names its source.
// GET /api/tasks/:id/drift and GET /api/drift report recorded model calls the server's code would
// make otherwise, and fromStep 'first-drift' re-runs from the first.
import { describe, expect, it } from 'vitest';
import { MockLanguageModelV3 } from 'ai/test';
import { NonRetryableError, workflow } from '../src/index.ts';
import { generateText } from '../src/ai/index.ts';
import { createServer } from '../src/server/index.ts';
import { eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const ran: string[] = [];
const twoSteps = workflow('two-steps', async (ctx, input: { n: number }) => {
  const a = await ctx.step('a', () => (ran.push('a'), input.n));
  return ctx.step('b', () => (ran.push('b'), a * 10));
});

const undone: string[] = [];
const booking = workflow('booking', async (ctx, input: { fail?: boolean }) => {
  await ctx.step('hold', () => (undone.push('hold'), 'H'), { compensate: () => void undone.push('release hold') });
  await ctx.step('pay', () => (undone.push('pay'), 'P'), { compensate: () => void undone.push('refund') });
  if (input.fail) await ctx.step('ship', () => Promise.reject(new NonRetryableError('no courier')));
  return 'booked';
});

describe('HTTP API and dashboard: re-run and fork', () => {
  it('re-runs a succeeded task undoing first (compensate), refuses a bad compensate, and a bulk retry with compensate skips the tasks that did not succeed', async () => {
    const engine = makeEngine({ workflows: [booking] });
    const server = createServer(engine, { tokens: TOKENS });
    const worker = await startWorker(engine);
    try {
      const ok = await engine.start(booking, {}, { tags: { batch: 'b1' } });
      const bad = await engine.start(booking, { fail: true }, { tags: { batch: 'b1' } });
      await waitForStatus(engine, ok.id, 'succeeded');
      await waitForStatus(engine, bad.id, 'failed');
      undone.length = 0;
      expect((await call(server, 'POST', `/api/tasks/${ok.id}/retry`, { as: 'oscar', body: { fromStep: 'pay', compensate: 'yes' } })).status).toBe(400);
      const noStep = await call(server, 'POST', `/api/tasks/${ok.id}/retry`, { as: 'oscar', body: { compensate: true } });
      expect(noStep.status).toBe(400);
      expect(noStep.body.error.message).toContain('fromStep');
      const rerun = await call(server, 'POST', `/api/tasks/${ok.id}/retry`, { as: 'oscar', body: { fromStep: 'pay', compensate: true } });
      expect(rerun.status).toBe(200);
      await eventually(async () => (await engine.get(ok.id)).status === 'succeeded', 10_000, 'the undo and re-run');
      expect(undone).toEqual(['refund', 'pay']);

      undone.length = 0;
      const dry = await call(server, 'POST', '/api/tasks/bulk', {
        as: 'oscar',
        body: { action: 'retry', filter: { tags: { batch: 'b1' } }, fromStep: 'hold', compensate: true, dryRun: true },
      });
      expect(dry.status).toBe(200);
      expect(dry.body).toMatchObject({ matched: 2, acted: 1, skippedCount: 1, skipped: [{ id: bad.id, status: 'failed', reason: expect.stringContaining('succeeded tasks only') }] });
      const done = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: { action: 'retry', filter: { tags: { batch: 'b1' } }, fromStep: 'hold', compensate: true } });
      expect(done.body).toMatchObject({ acted: 1, failedCount: 0 });
      await eventually(async () => (await engine.get(ok.id)).status === 'succeeded' && (await engine.get(ok.id)).retries === 2, 10_000, 'the bulk undo and re-run');
      expect(undone).toEqual(['refund', 'release hold', 'hold', 'pay']);
      expect((await engine.get(bad.id)).status).toBe('failed');
      const badBulk = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: { action: 'cancel', filter: {}, compensate: true, dryRun: true } });
      expect(badBulk.status).toBe(400);
    } finally {
      await worker.stop();
    }
  });

  it('re-runs a succeeded task from a step and forks it with another input; a viewer may do neither', async () => {
    const engine = makeEngine({ workflows: [twoSteps] });
    const server = createServer(engine, { tokens: TOKENS });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(twoSteps, { n: 2 });
      await waitForStatus(engine, id, 'succeeded');
      ran.length = 0;
      const refused = await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'oscar', body: {} });
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toContain('fromStep');
      expect((await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'oscar', body: { fromStep: 'zz' } })).status).toBe(400);
      expect((await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'vera', body: { fromStep: 'b' } })).status).toBe(403);
      const rerun = await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'oscar', body: { fromStep: 'b' } });
      expect(rerun.status).toBe(200);
      expect(rerun.body.status).toBe('pending');
      await waitForStatus(engine, id, 'succeeded');
      expect(ran).toEqual(['b']);

      expect((await call(server, 'POST', `/api/tasks/${id}/fork`, { as: 'vera', body: { fromStep: 'b' } })).status).toBe(403);
      expect((await call(server, 'POST', `/api/tasks/${id}/fork`, { as: 'oscar', body: { fromstep: 'b' } })).status).toBe(400);
      const fork = await call(server, 'POST', `/api/tasks/${id}/fork`, { as: 'oscar', body: { fromStep: 'b', input: { n: 3 }, tags: { experiment: 'x' } } });
      expect(fork.status).toBe(201);
      // The fork keeps the recorded a (2), so b gives 20 though its input says 3.
      expect(await engine.result(fork.body.id, { timeout: '10s' })).toBe(20);
      const got = await call(server, 'GET', `/api/tasks/${fork.body.id}`, { as: 'vera' });
      expect(got.body).toMatchObject({ forkedFrom: id, tags: { experiment: 'x' }, input: { n: 3 } });

      const operatorPage = (await call(server, 'GET', `/tasks/${id}`, { as: 'oscar' })).body as string;
      expect(operatorPage).toContain('data-rerun="retry" data-task="' + id + '" data-step="b"');
      expect(operatorPage).toContain('data-rerun="fork"');
      expect((await call(server, 'GET', `/tasks/${id}`, { as: 'vera' })).body).not.toContain('data-rerun');
      const forkPage = (await call(server, 'GET', `/tasks/${fork.body.id}`, { as: 'vera' })).body as string;
      expect(forkPage).toContain(`<dt>Forked from</dt><dd class="forked"><a href="/tasks/${id}">`);
    } finally {
      await worker.stop();
    }
  });

  it("reports drift to a viewer and re-runs from 'first-drift' for an operator", async () => {
    let calls = 0;
    const model = new MockLanguageModelV3({
      modelId: 'm1',
      doGenerate: async () => ({
        content: [{ type: 'text' as const, text: `answer ${++calls}` }],
        finishReason: { unified: 'stop' as const, raw: undefined },
        usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
        warnings: [],
      }),
    });
    const summary = (prompt: string) => workflow('summary', async (ctx) => (await generateText(ctx, 'summarise', { model, prompt })).text);
    const url = tempDbUrl();
    const old = makeEngine({ store: url, workflows: [summary('Summarise')] });
    const w1 = await startWorker(old);
    const { id } = await old.start('summary');
    await old.result(id, { timeout: '10s' });
    await w1.stop();

    const engine = makeEngine({ store: url, workflows: [summary('Summarise in one line')] });
    const server = createServer(engine, { tokens: TOKENS });
    const one = await call(server, 'GET', `/api/tasks/${id}/drift`, { as: 'vera' });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ taskId: id, workflow: 'summary', firstDrift: 'summarise', drift: [{ step: 'summarise' }] });
    const all = await call(server, 'GET', '/api/drift?workflow=summary&status=succeeded&limit=10', { as: 'vera' });
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ checked: 1, drifted: [{ taskId: id, firstDrift: 'summarise' }], unreplayable: [], nextCursor: null });
    expect((await call(server, 'GET', '/api/drift?statuz=failed', { as: 'vera' })).status).toBe(400);
    expect((await call(server, 'GET', '/api/tasks/0000000000000000000000000z/drift', { as: 'vera' })).status).toBe(404);
    expect(calls).toBe(1);

    expect((await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'vera', body: { fromStep: 'first-drift' } })).status).toBe(403);
    const worker = await startWorker(engine);
    try {
      const rerun = await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'oscar', body: { fromStep: 'first-drift' } });
      expect(rerun.status).toBe(200);
      expect(await engine.result(id, { timeout: '10s' })).toBe('answer 2');
      // Nothing has drifted now: a second re-run from the first drift is a conflict.
      const again = await call(server, 'POST', `/api/tasks/${id}/retry`, { as: 'oscar', body: { fromStep: 'first-drift' } });
      expect(again.status).toBe(409);
      expect(again.body.error.message).toContain('no drifted model call');
    } finally {
      await worker.stop();
    }
  });
});
