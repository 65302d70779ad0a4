// The objects workflow code and step functions receive: `ctx` and a step's context. Their functions
// work taken apart (`const { step } = ctx`, `async ({ signal, progress }) => …`), neither can be
// changed, and a step's signal, read whenever the step first asks for it, is the run's.
import { describe, expect, it } from 'vitest';
import { workflow, type StepContext } from '../src/index.ts';
import { gate, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('workflow and step contexts', () => {
  it("runs ctx's functions taken apart from ctx, and a step's progress and signal taken apart from its context", async () => {
    const wf = workflow('destructured', async (ctx) => {
      const { step, sleep, taskId, workflow: name } = ctx;
      const got = await step('one', ({ signal, progress, stepName, attempt }) => {
        progress({ done: 1, total: 2 });
        return { aborted: signal.aborted, stepName, attempt };
      });
      await sleep('nap', 1);
      return { got, taskId, name };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id)).toEqual({ got: { aborted: false, stepName: 'one', attempt: 1 }, taskId: id, name: 'destructured' });
    expect((await engine.get(id))?.progress).toMatchObject({ done: 1, total: 2 });
  });

  it('keeps ctx and a step context from being changed, with every field an own enumerable property that a spread keeps', async () => {
    let seen: { ctxFrozen: boolean; stepFrozen: boolean; ctxKeys: string[]; stepKeys: string[]; spreadSignal: unknown; ctxSpreadSignal: unknown } | undefined;
    const wf = workflow('frozen', async (ctx) => {
      await ctx.step('look', (s) => {
        seen = {
          ctxFrozen: Object.isFrozen(ctx),
          stepFrozen: Object.isFrozen(s),
          ctxKeys: Object.keys(ctx),
          stepKeys: Object.keys(s),
          spreadSignal: { ...s }.signal,
          ctxSpreadSignal: { ...ctx }.signal,
        };
      });
      expect(() => Object.assign(ctx, { step: null })).toThrow(TypeError);
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id)).toBe('ok');
    expect(seen?.ctxFrozen).toBe(true);
    expect(seen?.stepFrozen).toBe(true);
    expect(seen?.ctxKeys).toEqual(expect.arrayContaining(['taskId', 'workflow', 'signal', 'scheduledAt', 'step', 'sleep', 'waitForEvent', 'children', 'onCancel']));
    expect(seen?.stepKeys).toEqual(expect.arrayContaining(['signal', 'idempotencyKey', 'attempt', 'lastError', 'taskId', 'stepName', 'epoch', 'progress', 'rateLimit']));
    expect(seen?.spreadSignal).toBeInstanceOf(AbortSignal);
    expect(seen?.ctxSpreadSignal).toBe(seen?.spreadSignal);
  });

  it("gives a step that first reads its signal after the task was cancelled a signal that has fired, and the run's signal to ctx", async () => {
    const started = gate();
    const cancelled = gate();
    let signals: { step: AbortSignal; ctx: AbortSignal } | undefined;
    const wf = workflow('late-signal', async (ctx) => {
      await ctx.step('wait', async (s: StepContext) => {
        started.open();
        await cancelled.promise;
        signals = { step: s.signal, ctx: ctx.signal };
      });
      return 'unreachable';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.cancel(id);
    // The cancel has reached the run once the task is cancelling.
    await waitForStatus(engine, id, ['cancelling', 'cancelled']);
    cancelled.open();
    await waitForStatus(engine, id, 'cancelled');
    expect(signals?.step.aborted).toBe(true);
    expect(signals?.step).toBe(signals?.ctx);
  });
});
