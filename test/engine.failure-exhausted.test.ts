import { describe, expect, it } from 'vitest';
import { NonRetryableError, workflow } from '../src/index.ts';
import { taskDetail } from '../src/cli/format.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('when retries run out', () => {
  it("skips an optional step with onExhausted 'skip': its fallback is the output, it is recorded as skipped, and a resume does not run it again", async () => {
    const runs = { enrich: 0, after: 0 };
    let failAfter = true;
    const wf = workflow('optional', async (ctx) => {
      const extra = await ctx.step(
        'enrich',
        () => {
          runs.enrich++;
          throw new Error('enrichment service down');
        },
        { retry: { maxAttempts: 2, initialDelay: 1 }, onExhausted: 'skip', fallback: { tags: [] } },
      );
      await ctx.step('after', () => {
        runs.after++;
        if (failAfter) throw new NonRetryableError('disk full');
      });
      return extra;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('optional');
    await waitForStatus(engine, id, 'failed');
    failAfter = false;
    await engine.retry(id);
    expect(await engine.result(id)).toEqual({ tags: [] });
    expect(runs).toEqual({ enrich: 2, after: 2 });
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ name: 'enrich', status: 'completed', attempts: 2, output: { tags: [] }, error: { message: 'enrichment service down' } });
    // eslint-disable-next-line no-control-regex
    expect(taskDetail(info).replace(/\x1b\[[0-9;]*m/g, '')).toMatch(/enrich +completed +2 .*skipped: enrichment service down/);
  });

  it("fails the task by default (onExhausted 'fail')", async () => {
    const wf = workflow('must', async (ctx) =>
      ctx.step(
        'x',
        () => {
          throw new Error('nope');
        },
        { retry: { maxAttempts: 2, initialDelay: 1 }, onExhausted: 'fail' },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('must');
    await waitForStatus(engine, id, 'failed');
    expect((await engine.get(id)).steps[0]).toMatchObject({ status: 'failed', attempts: 2 });
  });

  it("refuses an ask option without onExhausted 'ask', a skip without fallback and a fallback without skip, failing the task before any attempt", async () => {
    let ran = 0;
    const opts = [
      { ask: { approvers: ['ops'] } },
      { onExhausted: 'skip' as const },
      { fallback: 1 },
      { onExhausted: 'later' as unknown as 'fail' },
      { repair: { maxAttempts: -1 } },
      { onExhausted: 'skip' as const, fallback: null, compensate: () => undefined },
      { onExhausted: 'ask' as const, ask: { quorum: 0 } },
      { onExhausted: 'ask' as const, ask: { approvers: ['ops'], wait: '1h' } as never },
    ];
    const messages: string[] = [];
    for (const [i, o] of opts.entries()) {
      const wf = workflow(`bad-${i}`, async (ctx) => ctx.step('s', () => ++ran, o));
      const engine = makeEngine({ workflows: [wf] });
      await startWorker(engine);
      const { id } = await engine.start(wf);
      await waitForStatus(engine, id, 'failed');
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error.code).toBe('INVALID_ARGUMENT');
      messages.push(info.status === 'failed' ? info.error.message : '');
    }
    expect(ran).toBe(0);
    expect(messages[0]).toMatch(/ask \(who decides an exhausted step\) needs onExhausted: 'ask'/);
    expect(messages[1]).toMatch(/needs a declared fallback/);
    expect(messages[2]).toMatch(/needs onExhausted: 'skip'/);
    expect(messages[3]).toMatch(/onExhausted must be 'fail', 'skip' or 'ask'/);
    expect(messages[4]).toMatch(/repair.maxAttempts must be an integer ≥ 0/);
    expect(messages[5]).toMatch(/cannot have a compensate/);
    expect(messages[6]).toMatch(/quorum must be a whole number ≥ 1/);
    expect(messages[7]).toMatch(/ask: unknown option "wait"/);
  });

  it('retries a failed task from a named step: steps before it keep their results, it and later ones run again', async () => {
    const runs: Record<string, number> = {};
    const count = (k: string): number => (runs[k] = (runs[k] ?? 0) + 1);
    let badDraft = true;
    const wf = workflow('pipeline', async (ctx) => {
      const docs = await ctx.step('gather', () => (count('gather'), ['a', 'b']));
      const draft = await ctx.step('draft', () => (count('draft'), badDraft ? 'bad draft' : 'good draft'));
      return ctx.step('publish', () => {
        count('publish');
        if (draft === 'bad draft') throw new NonRetryableError('the editor refused the draft');
        return `${docs.join('+')}: ${draft}`;
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('pipeline');
    await waitForStatus(engine, id, 'failed');
    await expect(engine.retry(id, { fromStep: 'drfat' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/no step "drfat".*gather, draft, publish/) });
    badDraft = false;
    await engine.retry(id, { fromStep: 'draft' });
    expect(await engine.result(id)).toBe('a+b: good draft');
    expect(runs).toEqual({ gather: 1, draft: 2, publish: 2 });
    const retry = (await engine.get(id)).history.find((e) => e.type === 'transition' && e.event === 'retry');
    expect(retry).toMatchObject({ detail: { fromStep: 'draft', forgotten: ['draft', 'publish'] } });
  });
});
