// Options and commands that are wrong in ways people actually get them wrong: each gets a typed
// error at the call, never a worker that silently does nothing or a warning in the user's logs.
import { describe, expect, it } from 'vitest';
import { IllegalTransitionError, transition, userEvents, workflow } from '../src/index.ts';
import { TEST_STORE, gate, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe(`validation (${TEST_STORE})`, () => {
  it('refuses an unknown workflow option (a typo such as tiemout) at definition time', () => {
    expect(() => workflow('typo', async () => 1, { tiemout: '1h' } as never)).toThrow(
      /unknown option "tiemout" \(known: version, compatibleVersions, input, retry, concurrency, priority, signals, budget, prices, timeout, cleanupTimeout, dwell, retention, schedule, title\)/,
    );
    expect(() => workflow('typo', async () => 1, { retyr: 3, concurency: 2 } as never)).toThrow(/unknown options "retyr", "concurency"/);
    expect(workflow('fine', async () => 1, { version: 2, retry: 3, concurrency: 4 }).version).toBe('2');
  });

  it('refuses worker counts that are not whole numbers ≥ 1 instead of flooring them to a worker that never claims', () => {
    const engine = makeEngine({ workflows: [workflow('w', async () => 1)] });
    for (const bad of [0.5, 0, -1, Number.NaN, 2.5]) {
      expect(() => engine.worker({ concurrency: bad })).toThrow(/concurrency must be a whole number ≥ 1/);
      expect(() => engine.worker({ claimBatch: bad })).toThrow(/claimBatch must be a whole number ≥ 1/);
    }
    expect(() => engine.worker({ leaseMs: 0 })).toThrow(/leaseMs must be a positive number/);
  });

  it('lists only the events a person can send in an illegal-transition error and in explain', async () => {
    const err = (() => {
      try {
        transition({ status: 'pending' }, 'complete', 't1');
      } catch (e) {
        return e as IllegalTransitionError;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(IllegalTransitionError);
    expect(err?.legalEvents).toEqual(['cancel', 'pause']);
    expect(err?.message).not.toContain('claim');
    expect(userEvents({ status: 'running' })).toEqual(['cancel', 'pause']);
    expect(userEvents({ status: 'failed' })).toEqual(['retry']);

    const engine = makeEngine({ workflows: [workflow('idle', async () => 1)] });
    const { id } = await engine.start('idle', undefined);
    expect((await engine.explain(id)).legalEvents).toEqual(['cancel', 'pause']);
    await expect(engine.retry(id)).rejects.toThrow('Legal events: cancel, pause.');
  });

  it('lets 600 callers wait for results at once without a MaxListenersExceededWarning', async () => {
    const wf = workflow('quick', async (ctx, n: number) => ctx.step('double', () => n * 2));
    const engine = makeEngine({ workflows: [wf] });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const ids = await Promise.all(Array.from({ length: 30 }, (_, i) => engine.start(wf, i).then((r) => r.id)));
      const waits = Array.from({ length: 600 }, (_, i) => engine.result(ids[i % ids.length] as string, { timeout: '60s' }));
      await startWorker(engine, { concurrency: 16 });
      const results = await Promise.all(waits);
      expect(results[31]).toBe(2);
      await waitForStatus(engine, ids[0] as string, 'succeeded');
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe(`values both stores can hold (${TEST_STORE})`, () => {
  const NUL = 'a\u0000b';
  const HALF_EMOJI = '🚀 launch'.slice(1); // a lone low surrogate

  it('refuses NUL characters and lone surrogates in keys, names, reasons and actors at the call, leaving the task untouched', async () => {
    const wf = workflow('plain', async (ctx) => ctx.waitForEvent('go'));
    const engine = makeEngine({ workflows: [wf] });
    await expect(engine.start(wf, 1, { idempotencyKey: NUL })).rejects.toThrow(/idempotencyKey contains a NUL character/);
    await expect(engine.start(wf, 1, { idempotencyKey: HALF_EMOJI })).rejects.toThrow(/lone UTF-16 surrogate/);
    const { id } = await engine.start(wf, 1);
    await expect(engine.signal(id, NUL)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.signal(id, 'go', 1, { idempotencyKey: HALF_EMOJI })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.cancel(id, { reason: NUL })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.pause(id, { by: HALF_EMOJI })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(() => engine.worker({ workerId: NUL })).toThrow(/workerId contains a NUL/);
    expect(() => workflow('v', async () => 1, { version: HALF_EMOJI })).toThrow(/version contains a lone UTF-16 surrogate/);
    const info = await engine.get(id);
    expect(info.status).toBe('pending');
    expect(info.history).toHaveLength(1);
    // In a JSON payload the same characters are fine: JSON escapes them, and they come back exactly.
    await engine.signal(id, 'go', { text: NUL + HALF_EMOJI });
    const received = (await engine.get(id)).history.find((e) => e.type === 'signal:received');
    expect(received?.type === 'signal:received' && received.payload).toEqual({ text: NUL + HALF_EMOJI });
  });

  it('refuses durations and delays beyond what a date can hold, with a typed error', async () => {
    const wf = workflow('later', async () => 1);
    const engine = makeEngine({ workflows: [wf] });
    await expect(engine.start(wf, 1, { delay: 1e20 })).rejects.toThrow(/longer than 100 years/);
    await expect(engine.start(wf, 1, { delay: '100000000d' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { id } = await engine.start(wf, 1, { delay: '3650d' });
    const explained = await engine.explain(id);
    expect(explained.summary).toMatch(/Pending until \d{4}-/);
  });
});

describe(`size limits (${TEST_STORE})`, () => {
  it('refuses an input or signal payload over its limit with PAYLOAD_TOO_LARGE, storing nothing', async () => {
    const wf = workflow('big', async (ctx) => ctx.waitForEvent('data'));
    const engine = makeEngine({ workflows: [wf], limits: { inputBytes: 1000, payloadBytes: 500 } });
    const err = await engine.start(wf, { text: 'x'.repeat(2000) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limitBytes: 1000 });
    expect((err as Error).message).toMatch(/The input of workflow "big" is 20\d\d bytes as JSON, over the limit of 1000 bytes.*limits\.inputBytes/);
    expect((await engine.list()).tasks).toHaveLength(0);
    // Multi-byte characters count as bytes, not as characters.
    await expect(engine.start(wf, { text: '€'.repeat(340) })).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    const { id } = await engine.start(wf, { text: 'small' });
    await expect(engine.signal(id, 'data', 'y'.repeat(600))).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limitBytes: 500 });
    expect((await engine.get(id)).history.some((e) => e.type === 'signal:received')).toBe(false);
    expect(() => makeEngine({ limits: { inputBytes: 0 } })).toThrow(/limits.inputBytes must be a whole number of bytes/);
  });
});

describe(`step names the journal can store (${TEST_STORE})`, () => {
  it('fails the task with a clear error at a step name that cuts an emoji in half, instead of breaking its resume', async () => {
    const title = '🚀 Launch plan for the week';
    const wf = workflow('sliced', async (ctx) => {
      await ctx.step('ok', () => 1);
      await ctx.step(title.slice(1, 20), () => 2); // starts with half of the emoji
      return 'unreachable';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('INVALID_ARGUMENT');
    expect(info.status === 'failed' && info.error.message).toMatch(/lone UTF-16 surrogate/);
    expect(info.steps.map((s) => s.name)).toEqual(['ok']);
  });

  it("fails the task with INVALID_ARGUMENT at a code call named with a prefix reserved for the cleanup (onCancel:, compensate:), which would share the cleanup's ids and keys", async () => {
    const ran: string[] = [];
    const cases = [
      { name: 'onCancel:release', prefix: 'onCancel:', kind: 'step' },
      { name: 'compensate:book', prefix: 'compensate:', kind: 'step' },
      { name: 'onCancel:nap', prefix: 'onCancel:', kind: 'sleep' },
    ] as const;
    const wfs = cases.map((c, i) =>
      workflow(`reserved-${i}`, async (ctx) => {
        await ctx.step('ok', () => 1);
        if (c.kind === 'step') await ctx.step(c.name, () => void ran.push(c.name));
        else await ctx.sleep(c.name, '1s');
      }),
    );
    const engine = makeEngine({ workflows: wfs });
    await startWorker(engine);
    for (const [i, c] of cases.entries()) {
      const { id } = await engine.start(`reserved-${i}`);
      await waitForStatus(engine, id, ['failed', 'succeeded']);
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error.code).toBe('INVALID_ARGUMENT');
      expect(info.status === 'failed' && info.error.message).toContain(`${c.kind} name "${c.name}" is not valid: the prefix "${c.prefix}" is reserved for the calls of the cleanup`);
      expect(info.steps.map((s) => s.name)).toEqual(['ok']);
    }
    expect(ran).toEqual([]);
  });

  it('lets an onCancel handler name its steps freely, reserved prefixes included (they are scoped under onCancel:)', async () => {
    const entered = gate();
    const wf = workflow('handler-names', async (ctx) => {
      ctx.onCancel(() => ctx.step('compensate:x', () => 1));
      await ctx.step(
        'work',
        ({ signal }) =>
          new Promise((_r, reject) => {
            entered.open();
            signal.addEventListener('abort', () => reject(signal.reason as Error));
          }),
      );
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id);
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(info.steps.map((s) => s.name)).toEqual(['onCancel:compensate:x']);
  });
});

describe(`output size limit (${TEST_STORE})`, () => {
  it('fails a step whose output is over the limit with PAYLOAD_TOO_LARGE instead of storing it', async () => {
    let calls = 0;
    const wf = workflow('huge-output', async (ctx) =>
      ctx.step('dump', () => {
        calls++;
        return 'x'.repeat(5000);
      }),
    );
    const engine = makeEngine({ workflows: [wf], limits: { outputBytes: 4096 } });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('STEP_FAILED');
    expect(info.steps[0]?.error?.code).toBe('PAYLOAD_TOO_LARGE');
    expect(info.steps[0]?.output).toBeUndefined();
    expect(calls).toBe(1); // not retried: a bigger output will not fit next time either
  });
});
