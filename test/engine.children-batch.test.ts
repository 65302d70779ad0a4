import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('ctx.children', () => {
  it('runs one child per input, at most `concurrency` at once, and returns the outputs in input order', async () => {
    let running = 0;
    let most = 0;
    const square = workflow('square', async (ctx, input: { n: number }) =>
      ctx.step('square', async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 5 + (input.n % 3) * 5));
        running--;
        return input.n * input.n;
      }),
    );
    const parent = workflow('squares', async (ctx, input: { count: number }) =>
      ctx.children(
        square,
        Array.from({ length: input.count }, (_, n) => ({ n })),
        { concurrency: 3 },
      ),
    );
    const engine = makeEngine({ workflows: [parent, square] });
    await startWorker(engine, { concurrency: 16 });
    const { id } = await engine.start(parent, { count: 12 });
    expect(await engine.result(id)).toEqual(Array.from({ length: 12 }, (_, n) => n * n));
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThanOrEqual(1);
    expect((await engine.get(id)).children).toHaveLength(12);
  });

  it('throws the first ChildFailedError and starts no further child', async () => {
    const maybe = workflow('maybe', async (ctx, input: { fail: boolean }) => {
      if (input.fail) throw Object.assign(new Error('bad input'), { retryable: false });
      return ctx.step('ok', () => 'ok');
    });
    const parent = workflow('stops-at-failure', async (ctx) => ctx.children(maybe, [{ fail: false }, { fail: true }, { fail: false }, { fail: false }], { concurrency: 1 }));
    const engine = makeEngine({ workflows: [parent, maybe] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.CHILD_FAILED);
    expect(info.children.map((c) => c.status)).toEqual(['succeeded', 'failed']);
  });

  it('refuses a concurrency that is not a whole number ≥ 1', async () => {
    const noop = workflow('noop', async () => null);
    const parent = workflow('bad-concurrency', async (ctx) => ctx.children(noop, [1, 2], { concurrency: 0 }));
    const engine = makeEngine({ workflows: [parent, noop] });
    await startWorker(engine);
    const { id } = await engine.start(parent);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(info.status === 'failed' && info.error.message).toContain('concurrency');
  });
});
