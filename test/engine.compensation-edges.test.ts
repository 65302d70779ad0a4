// Compensations at the edges of a run: a retry after a cleanup that undid steps, steps still
// running beside the one that ended the task, and a worker that stops during a cleanup step that
// ignores its signal.
import { describe, expect, it } from 'vitest';
import { NonRetryableError, rebuildTask, workflow, type Observer, type TaskInfo } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, gate, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';

function stepNames(info: TaskInfo): string[] {
  return info.steps.map((s) => `${s.name}:${s.status}`);
}

function retryDetail(info: TaskInfo): unknown {
  return transitionsOf(info).find((t) => t.event === 'retry')?.detail;
}

/** A step function that never settles and never looks at its signal. */
const ignoresSignal = (started: () => void) => (): Promise<never> => {
  started();
  return new Promise<never>(() => undefined);
};

describe('retry after a cleanup that undid steps', () => {
  it('runs again a step whose compensation completed, and what the code did after receiving it', async () => {
    const effects: string[] = [];
    let declined = true;
    const wf = workflow('undone-then-retried', async (ctx) => {
      const booking = await ctx.step(
        'book',
        () => {
          effects.push('book');
          return `B${effects.filter((e) => e === 'book').length}`;
        },
        { compensate: (b: string) => void effects.push(`unbook ${b}`) },
      );
      await ctx.step('charge', () => {
        effects.push('charge');
        if (declined) throw new NonRetryableError('card declined');
        return 'paid';
      });
      return booking;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    expect(effects).toEqual(['book', 'charge', 'unbook B1']);
    declined = false;
    await engine.retry(id);
    // The retried task books again: the first booking was undone.
    expect(await engine.result(id, { timeout: '10s' })).toBe('B2');
    expect(effects).toEqual(['book', 'charge', 'unbook B1', 'book', 'charge']);
    const info = await engine.get(id);
    expect(stepNames(info)).toEqual(['book:completed', 'charge:completed']);
    expect(retryDetail(info)).toMatchObject({ fromStep: 'book', undone: ['book'], forgotten: ['book', 'charge', 'compensate:book'] });
  });

  it('runs an undone step again under a new idempotency key (and its compensation too), so an API that deduplicates does not hand back the cancelled booking', async () => {
    const keys: string[] = [];
    let declines = 2;
    const wf = workflow('undone-new-key', async (ctx) => {
      await ctx.step('prepare', ({ idempotencyKey }) => void keys.push(`prepare ${idempotencyKey}`));
      await ctx.step('book', ({ idempotencyKey }) => void keys.push(`book ${idempotencyKey}`), {
        compensate: (_b, { idempotencyKey }) => void keys.push(`unbook ${idempotencyKey}`),
      });
      await ctx.step('reserve', ({ idempotencyKey }) => void keys.push(`reserve ${idempotencyKey}`), {
        key: 'seat:order-9',
        compensate: (_r, { idempotencyKey }) => void keys.push(`unreserve ${idempotencyKey}`),
      });
      await ctx.step('charge', () => {
        if (declines-- > 0) throw new NonRetryableError('card declined');
      });
    });
    // Observers see the key each attempt received (not one rebuilt from the task and step id).
    const observed: string[] = [];
    const observer: Observer = { onStepStart: (a) => void (a.step !== 'charge' && observed.push(a.idempotencyKey)) };
    const engine = makeEngine({ workflows: [wf], observers: [observer] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    for (let round = 0; round < 2; round++) {
      await waitForStatus(engine, id, 'failed');
      await engine.retry(id);
    }
    await engine.result(id, { timeout: '10s' });
    const k = (name: string, suffix = ''): string => `v1:${id}:${name}#1${suffix}`;
    expect(keys).toEqual([
      `prepare ${k('prepare')}`,
      `book ${k('book')}`,
      'reserve v1:seat:order-9',
      `unreserve ${k('compensate:reserve')}`,
      `unbook ${k('compensate:book')}`,
      // The first retry: the business key's stored result is not handed back either; it runs again.
      `book ${k('book', ':redo1')}`,
      'reserve v1:seat:order-9:redo1',
      `unreserve ${k('compensate:reserve', ':redo1')}`,
      `unbook ${k('compensate:book', ':redo1')}`,
      `book ${k('book', ':redo2')}`,
      'reserve v1:seat:order-9:redo2',
    ]);
    expect(observed).toEqual(keys.map((line) => line.slice(line.indexOf(' ') + 1)));
    const info = await engine.get(id);
    expect(info.steps.find((s) => s.name === 'book')?.idempotencyKey).toBe(k('book', ':redo2'));
    expect(info.steps.find((s) => s.name === 'prepare')?.idempotencyKey).toBe(k('prepare'));
    // The business-keyed step shows the key it received, from its row and from the task's log alone.
    expect(info.steps.find((s) => s.name === 'reserve')?.idempotencyKey).toBe('v1:seat:order-9:redo2');
    expect(rebuildTask(info.history).steps.find((s) => s.name === 'reserve')?.businessKey).toBe('v1:seat:order-9');
  });

  it('keeps a step that ran beside the undone one (a Promise.all branch without compensation): its side effect is not repeated', async () => {
    const effects: string[] = [];
    let declined = true;
    const wf = workflow('undone-beside-kept', async (ctx) => {
      const [booking] = await Promise.all([
        ctx.step(
          'book',
          () => {
            effects.push('book');
            return `B${effects.filter((e) => e === 'book').length}`;
          },
          { compensate: (b: string) => void effects.push(`unbook ${b}`) },
        ),
        ctx.step('email', () => void effects.push('email')),
      ]);
      await ctx.step('charge', () => {
        if (declined) throw new NonRetryableError('card declined');
      });
      return booking;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    declined = false;
    await engine.retry(id);
    expect(await engine.result(id, { timeout: '10s' })).toBe('B2');
    expect(effects.filter((e) => e === 'email')).toEqual(['email']);
    expect(effects.filter((e) => e !== 'email')).toEqual(['book', 'unbook B1', 'book']);
    const info = await engine.get(id);
    expect(retryDetail(info)).toMatchObject({ undone: ['book'], forgotten: ['book', 'charge', 'compensate:book'] });
  });

  it('with fromStep, also runs again an undone step earlier than fromStep', async () => {
    const effects: string[] = [];
    let declined = true;
    const wf = workflow('undone-before-from-step', async (ctx) => {
      await ctx.step('book', () => void effects.push('book'), { compensate: () => void effects.push('unbook') });
      await ctx.step('charge', () => {
        effects.push('charge');
        if (declined) throw new NonRetryableError('card declined');
      });
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    declined = false;
    await engine.retry(id, { fromStep: 'charge' });
    expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
    expect(effects).toEqual(['book', 'charge', 'unbook', 'book', 'charge']);
    expect(retryDetail(await engine.get(id))).toMatchObject({ fromStep: 'charge', undone: ['book'] });
  });

  it('keeps a step whose compensation failed (it was not undone) and runs again the later one that was undone', async () => {
    const effects: string[] = [];
    let refused = true;
    const wf = workflow('half-undone-retried', async (ctx) => {
      await ctx.step('reserve', () => void effects.push('reserve'), {
        retry: 1,
        compensate: () => {
          throw new NonRetryableError('reservation system down');
        },
      });
      await ctx.step('ship', () => void effects.push('ship'), { compensate: () => void effects.push('unship') });
      await ctx.step('invoice', () => {
        effects.push('invoice');
        if (refused) throw new NonRetryableError('tax service refused');
      });
      return 'done';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const failed = await engine.get(id);
    expect(failed.status === 'failed' && failed.error).toMatchObject({ code: 'COMPENSATION_FAILED', data: { failedCompensations: 'reserve' } });
    refused = false;
    await engine.retry(id);
    expect(await engine.result(id, { timeout: '10s' })).toBe('done');
    expect(effects).toEqual(['reserve', 'ship', 'invoice', 'unship', 'ship', 'invoice']);
    const info = await engine.get(id);
    expect(stepNames(info)).toEqual(['reserve:completed', 'ship:completed', 'invoice:completed']);
    expect(retryDetail(info)).toMatchObject({ fromStep: 'ship', undone: ['ship'], forgotten: ['ship', 'invoice', 'compensate:ship', 'compensate:reserve'] });
  });
});

describe('steps still running when the task fails for good or is cancelled', () => {
  it('waits for a step still running beside the one that failed the task, and compensates it once it completes', async () => {
    const undone: string[] = [];
    const slow = gate<string>();
    const started = gate();
    const wf = workflow('sibling-in-flight', async (ctx) => {
      await Promise.all([
        ctx.step(
          'a',
          () => {
            started.open();
            return slow.promise;
          },
          { compensate: (out: string) => void undone.push(`undo ${out}`) },
        ),
        ctx.step('b', async () => {
          await started.promise;
          throw new NonRetryableError('b broke');
        }),
      ]);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await eventually(async () => stepNames(await engine.get(id)).includes('b:failed'), 10_000, 'b to fail');
    // The code has thrown; the run waits for `a` before its cleanup.
    expect((await engine.get(id)).status).toBe('running');
    slow.open('A1');
    await waitForStatus(engine, id, 'failed');
    expect(undone).toEqual(['undo A1']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: 'STEP_FAILED', message: expect.stringContaining('b broke') });
    expect(stepNames(info).sort()).toEqual(['a:completed', 'b:failed', 'compensate:a:completed']);
  });

  it("names a step still running at the cleanup's deadline in COMPENSATION_FAILED: it was not undone", async () => {
    const clock = new ManualClock();
    const started = gate();
    const undone: string[] = [];
    const wf = workflow(
      'sibling-stuck',
      async (ctx) => {
        await Promise.all([
          ctx.step(
            'a',
            ignoresSignal(() => started.open()),
            { compensate: () => void undone.push('a') },
          ),
          ctx.step('b', async () => {
            await started.promise;
            throw new NonRetryableError('b broke');
          }),
        ]);
      },
      { cleanupTimeout: '1m' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { cancelGraceMs: 50, leaseMs: 86_400_000 });
    const { id } = await engine.start(wf);
    await eventually(
      async () => {
        await clock.advance('1m');
        return (await engine.get(id)).status === 'failed';
      },
      10_000,
      'the task to fail',
    );
    const info = await engine.get(id);
    expect(undone).toEqual([]);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/failed \(.*b broke\) and could not be fully undone: compensation of "a": not undone: .*still running.*60000 ms deadline/),
      cause: { code: 'STEP_FAILED' },
      data: { cancelled: false, failedCompensations: 'a' },
    });
  });

  it('after a cancel, records a step with a compensation that completes within the grace period, and compensates it', async () => {
    const undone: string[] = [];
    const slow = gate<string>();
    const started = gate();
    const wf = workflow('cancel-sibling-completes', async (ctx) => {
      await Promise.all([
        ctx.step(
          'a',
          () => {
            started.open();
            return slow.promise; // does not listen to its signal
          },
          { compensate: (out: string) => void undone.push(`undo ${out}`) },
        ),
        ctx.step('work', ({ signal }) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)))),
      ]);
    });
    const engine = makeEngine({ workflows: [wf] });
    // A grace period long enough for the test to answer within it.
    await startWorker(engine, { cancelGraceMs: 20_000 });
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.cancel(id);
    slow.open('A1');
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(undone).toEqual(['undo A1']);
    expect(stepNames(info)).toEqual(['a:completed', 'compensate:a:completed']);
  });

  it('after a cancel, names a step with a compensation that is still running when the grace period ends in COMPENSATION_FAILED', async () => {
    const started = gate();
    const wf = workflow('cancel-sibling-stuck', async (ctx) => {
      await ctx.step(
        'a',
        ignoresSignal(() => started.open()),
        { compensate: () => undefined },
      );
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { cancelGraceMs: 50 });
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.cancel(id, { reason: 'stop' });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/was cancelled \(reason: stop\) and could not be fully undone: compensation of "a": not undone: .*still running/),
      data: { cancelled: true, failedCompensations: 'a' },
    });
    expect(stepNames(info)).toEqual([]);
  });
});

describe('a worker stopping during a cleanup step that ignores its signal', () => {
  it("returns from stop() once the cancel grace period has passed, well before the cleanup's deadline; the task stays cancelling and the next worker finishes the cleanup", async () => {
    const clock = new ManualClock();
    const entered = gate();
    const undoStarted = gate();
    const undone: string[] = [];
    let stubborn = true;
    const wf = workflow(
      'stubborn-undo',
      async (ctx) => {
        await ctx.step('book', () => 'B1', {
          compensate: (b: string) => {
            if (!stubborn) return void undone.push(`unbook ${b}`);
            undoStarted.open();
            return new Promise(() => undefined); // ignores its signal
          },
        });
        await ctx.step(
          'work',
          ({ signal }) =>
            new Promise((_r, reject) => {
              entered.open();
              signal.addEventListener('abort', () => reject(signal.reason as Error));
            }),
        );
      },
      { cleanupTimeout: '1h' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    // Leases are judged by the engine's clock on SQLite and by the database's on PostgreSQL: short,
    // and the clock moved past one below.
    const leaseMs = 1000;
    const first = await startWorker(engine, { cancelGraceMs: 50, shutdownGraceMs: 50, leaseMs });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id, { reason: 'stop' });
    await undoStarted.promise;
    // The cleanup's deadline is an hour away on a clock that does not move: stop() must not wait for it.
    const stopped = await Promise.race([first.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('stop() still waiting'), 15_000).unref())]);
    expect(stopped).toBe('stopped');
    // No end was written: the task is still cancelling, its compensation not recorded.
    const between = await engine.get(id);
    expect(between.status).toBe('cancelling');
    expect(stepNames(between)).toEqual(['book:completed']);
    // Once the lease has expired, another worker takes the task over and finishes the cleanup.
    stubborn = false;
    await clock.advance(leaseMs + 1);
    await startWorker(engine, { leaseMs });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(undone).toEqual(['unbook B1']);
    expect(stepNames(info)).toEqual(['book:completed', 'compensate:book:completed']);
  });
});
