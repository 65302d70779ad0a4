// engineOf(ctx): workflow code reaches the Engine it runs under, without a second Engine on the same store.
import { describe, expect, it } from 'vitest';
import { engineOf, isStepwiseError, workflow, type WorkflowContext } from '../src/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';

describe('engineOf(ctx)', () => {
  it('gives workflow code the engine whose worker runs it, to start and read other tasks', async () => {
    const child = workflow('child', async (_ctx, n: number) => n * 2);
    const parent = workflow('parent', async (ctx) => {
      const engine = engineOf(ctx);
      const childId = await ctx.step('start-child', async () => (await engine.start(child, 21, { idempotencyKey: `child-of-${ctx.taskId}` })).id);
      return ctx.step('child-result', () => engine.result<number>(childId, { timeout: '20s' }));
    });
    const engine = makeEngine({ workflows: [parent, child] });
    await startWorker(engine);
    const { id } = await engine.start(parent, {});
    expect(await engine.result(id, { timeout: '30s' })).toBe(42);
  });

  it('refuses an object that is not a workflow context with INVALID_ARGUMENT', () => {
    let error: unknown;
    try {
      engineOf({} as WorkflowContext);
    } catch (e) {
      error = e;
    }
    expect(isStepwiseError(error, 'INVALID_ARGUMENT')).toBe(true);
    expect((error as Error).message).toContain('engineOf(ctx)');
  });
});
