// A durable call made inside another step's function is refused at once (NESTED_STEP), naming both
// steps; calls beside each other (parallel steps, a step chained on another's result) still run.
import { describe, expect, it } from 'vitest';
import { NestedStepError, TaskFailedError, workflow, type TaskInfo, type Workflow, type WorkflowContext } from '../src/index.ts';
import { gate, makeEngine, startWorker } from './support/engine.ts';

/** A helper that takes ctx, as model calls and sub-agents do. */
async function summarise(ctx: WorkflowContext, text: string): Promise<string> {
  return ctx.step(`summarise ${text}`, () => text.toUpperCase());
}

/** The task's failure, as a caller of `engine.result` sees it (the error as stored with the task). */
async function failure(id: string, engine: ReturnType<typeof makeEngine>): Promise<Error & { code: string }> {
  const e = await engine.result(id, { timeout: '20s' }).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(TaskFailedError);
  const cause = (e as TaskFailedError).cause as Error & { code: string };
  expect(cause).toMatchObject({ code: 'NESTED_STEP', name: 'NestedStepError' });
  return cause;
}

/** Runs one task of `wf` to its NESTED_STEP failure: the error, and the task as `engine.get` shows it. */
async function nestedFailure(wf: Workflow<unknown, unknown>): Promise<{ error: Error & { code: string }; info: TaskInfo }> {
  const engine = makeEngine({ workflows: [wf] });
  try {
    await startWorker(engine);
    const { id } = await engine.start(wf, {});
    const error = await failure(id, engine);
    return { error, info: await engine.get(id) };
  } finally {
    await engine.close();
  }
}

describe('durable calls inside a step function', () => {
  it('fails the task on its first run with NESTED_STEP naming the enclosing step and the inner call, and records no inner step', async () => {
    let outerRuns = 0;
    const wf = workflow('nested', async (ctx) => {
      const brief = await ctx.step('research', async () => {
        outerRuns++;
        return summarise(ctx, 'notes');
      });
      return brief;
    });
    const { error, info } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise notes" was called inside the function of step "research"');
    expect(error.message).toContain('Call step "summarise notes" from the workflow function');
    expect(info.status).toBe('failed');
    expect(info.steps.map((s) => s.name)).not.toContain('summarise notes');
    expect(outerRuns).toBe(1); // not retried: retrying cannot fix the code
  });

  it('refuses a helper that takes ctx called in a ctx.forEach item, after awaits and timers inside the item', async () => {
    const wf = workflow('nested-for-each', async (ctx) =>
      ctx.forEach('pages', ['a', 'b'], async (page) => {
        await new Promise((r) => setTimeout(r, 1));
        return summarise(ctx, page);
      }),
    );
    const { error } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise a" was called inside the function of step "pages:0-1"');
    expect(error.message).toContain('ctx.forEach item');
  });

  it('refuses ctx.sleep and ctx.waitForEvent inside a step function too', async () => {
    const sleeper = workflow('nested-sleep', async (ctx) => ctx.step('outer', () => ctx.sleep('pause', '1s')));
    const waiter = workflow('nested-wait', async (ctx) => ctx.step('outer', () => ctx.waitForEvent('callback')));
    const engine = makeEngine({ workflows: [sleeper, waiter] });
    try {
      await startWorker(engine);
      const a = await engine.start(sleeper, {});
      const b = await engine.start(waiter, {});
      expect((await failure(a.id, engine)).message).toContain('sleep "pause" was called inside the function of step "outer"');
      expect((await failure(b.id, engine)).message).toContain('"callback" was called inside the function of step "outer"');
    } finally {
      await engine.close();
    }
  });

  it('is a typed error in the code that made the call (a try/catch around it cannot keep the task going)', async () => {
    let caught: unknown;
    const wf = workflow('nested-caught', async (ctx) => {
      await ctx.step('outer', async () => {
        try {
          await ctx.step('inner', () => 1);
        } catch (e) {
          caught = e;
        }
        return 'swallowed';
      });
      return 'went on';
    });
    const engine = makeEngine({ workflows: [wf] });
    try {
      await startWorker(engine);
      const { id } = await engine.start(wf, {});
      await failure(id, engine);
      expect(caught).toBeInstanceOf(NestedStepError);
      expect(caught).toMatchObject({ step: 'outer', call: 'inner', taskId: id });
    } finally {
      await engine.close();
    }
  });

  it('refuses a call inside a step still in flight after steps beside it (synchronous and asynchronous) have ended', async () => {
    const wf = workflow('nested-after-others', async (ctx) => {
      // The long step makes its call only once the short one has ended (its result reached the code).
      const shortEnded = gate();
      const [, , brief] = await Promise.all([
        ctx.step('quick', () => 1),
        ctx
          .step('short', async () => new Promise<number>((r) => setImmediate(() => r(2))))
          .then((v) => {
            shortEnded.open();
            return v;
          }),
        ctx.step('long', async () => {
          await shortEnded.promise;
          return summarise(ctx, 'late');
        }),
      ]);
      return brief;
    });
    const { error } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise late" was called inside the function of step "long"');
  });

  it('refuses a call in the continuation of a plain (not async) step function that returns a promise', async () => {
    const wf = workflow('nested-plain-promise', async (ctx) => ctx.step('fetch', () => new Promise<void>((r) => setImmediate(r)).then(() => summarise(ctx, 'body'))));
    const { error } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise body" was called inside the function of step "fetch"');
  });

  it('refuses a call made inside a plain step function whose name already ran synchronously many times', async () => {
    // The first calls of `tick` return plain values: later calls of that name take the cheaper
    // marker instead of the async context, which must refuse the inner call all the same.
    const wf = workflow('nested-plain-repeat', async (ctx) => {
      for (let i = 0; i < 5; i++) await ctx.step('tick', () => i);
      return ctx.step('tick', () => summarise(ctx, 'late tick'));
    });
    const { error, info } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise late tick" was called inside the function of step "tick#6"');
    expect(info.steps.filter((s) => s.status === 'completed').map((s) => s.name)).toEqual(['tick', 'tick#2', 'tick#3', 'tick#4', 'tick#5']);
  });

  it('refuses a call in the continuation of a plain step function of one workflow whose step name another workflow’s synchronous function uses', async () => {
    const plain = workflow('names-plain', async (ctx) => ctx.step('load', () => 1));
    const later = workflow('names-later', async (ctx) => ctx.step('load', () => Promise.resolve().then(() => summarise(ctx, 'loaded'))));
    const engine = makeEngine({ workflows: [plain, later] });
    try {
      await startWorker(engine);
      for (let round = 0; round < 2; round++) {
        expect(await engine.result((await engine.start(plain, {})).id, { timeout: '20s' })).toBe(1);
        const error = await failure((await engine.start(later, {})).id, engine);
        expect(error.message).toContain('step "summarise loaded" was called inside the function of step "load"');
      }
    } finally {
      await engine.close();
    }
  });

  it('misses a call in the continuation of a plain step function only the first time its name returns a promise, then refuses it for good', async () => {
    // `read` returns plain values, then a promise (the marker's one miss, see run/step-scope.ts),
    // then plain values and promises by turns: every promise after the first is in the context.
    const wf = workflow('nested-plain-turns', async (ctx) => {
      for (let i = 0; i < 6; i++) await ctx.step('read', () => (i % 2 === 0 ? i : Promise.resolve(i).then(() => summarise(ctx, `read ${i}`))));
      return 'done';
    });
    const { error, info } = await nestedFailure(wf);
    expect(error.message).toContain('step "summarise read 3" was called inside the function of step "read#4"');
    expect(info.steps.filter((s) => s.status === 'completed').map((s) => s.name)).toEqual(['read', 'read#2', 'summarise read 1', 'read#3']);
  });

  it('still runs steps side by side (Promise.all) and a step chained on another step’s result, and replays them after a park', async () => {
    const wf = workflow('beside', async (ctx) => {
      const [a, b] = await Promise.all([summarise(ctx, 'x'), ctx.step('slow', async () => new Promise<string>((r) => setTimeout(() => r('y'), 5)))]);
      const c = await ctx.step('first', () => 1).then((n) => ctx.step('second', () => n + 1));
      await ctx.waitForEvent('go');
      return `${a}${b}${c}`;
    });
    const engine = makeEngine({ workflows: [wf] });
    try {
      await startWorker(engine, { keepParked: 0 }); // not kept in memory: the signal replays the task
      const { id } = await engine.start(wf, {});
      await expect.poll(async () => (await engine.get(id)).status, { timeout: 20_000 }).toBe('waiting');
      await engine.signal(id, 'go');
      expect(await engine.result(id, { timeout: '20s' })).toBe('Xy2');
    } finally {
      await engine.close();
    }
  });
});
