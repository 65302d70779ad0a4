// Re-run and fork over HTTP: POST /api/tasks/:id/retry takes fromStep (required for a succeeded or
// cancelled task), POST /api/tasks/:id/fork makes the fork (201); both need the operate right; the
// dashboard shows the step buttons to an operator only, and a fork's page names its source.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const ran: string[] = [];
const twoSteps = workflow('two-steps', async (ctx, input: { n: number }) => {
  const a = await ctx.step('a', () => (ran.push('a'), input.n));
  return ctx.step('b', () => (ran.push('b'), a * 10));
});

describe('HTTP API and dashboard: re-run and fork', () => {
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
});
