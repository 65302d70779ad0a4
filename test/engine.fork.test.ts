// Re-run and fork from any step: a succeeded or cancelled task runs again from a named step (the
// steps before it are not run again), and a fork is a new task that reuses the journal up to a
// step, with another input if given, recording its lineage; the source is untouched.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

function pipeline() {
  const calls: string[] = [];
  const wf = workflow('article', async (ctx, input: { topic: string; tone?: string }) => {
    const research = await ctx.step('research', () => {
      calls.push('research');
      return `notes on ${input.topic}`;
    });
    const draft = await ctx.step('draft', () => {
      calls.push('draft');
      return `${input.tone ?? 'plain'} draft from ${research}`;
    });
    await ctx.waitForEvent('go', { timeout: '1h' }).catch(() => null);
    return ctx.step('publish', () => {
      calls.push('publish');
      return `published: ${draft}`;
    });
  });
  return { wf, calls };
}

describe(`re-run and fork from a step (${TEST_STORE})`, () => {
  it('re-runs a succeeded task from a named step: earlier steps are not run again, its output is replaced', async () => {
    const { wf, calls } = pipeline();
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { topic: 'tides' });
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'go', null);
      await waitForStatus(engine, id, 'succeeded');
      expect(calls).toEqual(['research', 'draft', 'publish']);
      await expect(engine.retry(id)).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT, message: expect.stringContaining('fromStep') });
      await expect(engine.retry(id, { fromStep: 'nope' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      const again = await engine.retry(id, { fromStep: 'draft' });
      expect(again.status).toBe('pending');
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'go', null);
      await waitForStatus(engine, id, 'succeeded');
      expect(calls).toEqual(['research', 'draft', 'publish', 'draft', 'publish']);
      const task = await engine.get(id);
      expect(task.retries).toBe(1);
      expect(task.history.some((e) => e.type === 'transition' && e.event === 'retry' && e.detail?.rerun === 'succeeded')).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('re-runs a cancelled task from a named step', async () => {
    const { wf, calls } = pipeline();
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { topic: 'tides' });
      await waitForStatus(engine, id, 'waiting');
      await engine.cancel(id, { reason: 'wrong tone' });
      await waitForStatus(engine, id, 'cancelled');
      await expect(engine.retry(id)).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT });
      await engine.retry(id, { fromStep: 'draft' });
      await waitForStatus(engine, id, 'waiting');
      expect((await engine.get(id)).cancelReason).toBeNull();
      await engine.signal(id, 'go', null);
      expect(await engine.result(id, { timeout: '10s' })).toBe('published: plain draft from notes on tides');
      expect(calls).toEqual(['research', 'draft', 'draft', 'publish']);
    } finally {
      await worker.stop();
    }
  });

  it('forks a task from a step with another input: the copied steps are not run again, the source is untouched', async () => {
    const { wf, calls } = pipeline();
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { topic: 'tides' }, { tags: { tenant: 'acme' } });
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'go', null);
      const original = await engine.result(id, { timeout: '10s' });
      calls.length = 0;

      const fork = await engine.fork(id, { fromStep: 'draft', input: { topic: 'tides', tone: 'formal' }, tags: { experiment: 'tone' } });
      expect(fork).toMatchObject({ workflow: 'article', created: true });
      await waitForStatus(engine, fork.id, 'waiting');
      await engine.signal(fork.id, 'go', null);
      // research was copied (its notes are the source's), draft ran again with the new tone.
      expect(await engine.result(fork.id, { timeout: '10s' })).toBe('published: formal draft from notes on tides');
      expect(calls).toEqual(['draft', 'publish']);
      const info = await engine.get(fork.id);
      expect(info.forkedFrom).toBe(id);
      expect(info.tags).toEqual({ tenant: 'acme', experiment: 'tone' });
      expect(info.steps.map((s) => s.name)).toEqual(['research', 'draft', 'go', 'publish']);
      expect(info.history[0]).toMatchObject({ type: 'transition', event: 'create', detail: { forkedFrom: id, fromStep: 'draft', copied: ['research'] } });
      // The source is as it was.
      const source = await engine.get(id);
      expect(source.status).toBe('succeeded');
      expect(await engine.result(id)).toBe(original);
      expect(source.forkedFrom).toBeNull();

      // Without fromStep the fork runs from the start, with the source's input.
      calls.length = 0;
      const fresh = await engine.fork(id);
      await waitForStatus(engine, fresh.id, 'waiting');
      expect(calls).toEqual(['research', 'draft']);
    } finally {
      await worker.stop();
    }
  });

  it("wakes this process's workers: a fork runs without waiting for a poll", async () => {
    const { wf } = pipeline();
    const engine = makeEngine({ workflows: [wf] });
    // A poll a minute apart: only the fork's wake-up can make it run within the test.
    const worker = await startWorker(engine, { pollIntervalMs: 60_000 });
    try {
      const { id } = await engine.start(wf, { topic: 'tides' });
      await waitForStatus(engine, id, 'waiting');
      const fork = await engine.fork(id, { fromStep: 'draft' });
      await waitForStatus(engine, fork.id, 'waiting', 20_000);
    } finally {
      await worker.stop();
    }
  });

  it('refuses a fork of an unknown task, from an unknown step, or with an unknown option', async () => {
    const { wf } = pipeline();
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf, { topic: 'tides' });
    await expect(engine.fork('no-such-task')).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
    await expect(engine.fork(id, { fromStep: 'draft' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringContaining('no step "draft"') });
    await expect(engine.fork(id, { fromstep: 'draft' } as never)).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringContaining('unknown option "fromstep"'),
    });
    expect((await engine.list()).tasks).toHaveLength(1);
  });
});
