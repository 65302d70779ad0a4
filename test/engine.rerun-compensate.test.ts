// A re-run that undoes first: retry(id, { fromStep, compensate: true }) of a succeeded task runs the
// compensations of the completed steps it forgets (newest first, each once), then runs the task
// again from that step, the undone steps under new idempotency keys. Without `compensate` nothing is
// undone. A failed undo fails the task and says so; a cancel during the undo undoes everything.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, NonRetryableError, workflow } from '../src/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';

interface TripOptions {
  /** The compensation of `charge` fails for good. */
  refundFails?: boolean;
  /** The compensation of `charge` waits for this before it refunds. */
  refundGate?: Promise<void>;
}

function trip(options: TripOptions = {}) {
  const effects: string[] = [];
  let hotels = 0;
  const wf = workflow('trip', async (ctx, input: { city: string }) => {
    const flight = await ctx.step(
      'flight',
      ({ idempotencyKey }) => {
        effects.push(`book flight ${idempotencyKey}`);
        return 'F1';
      },
      { compensate: (f: string, { idempotencyKey }) => void effects.push(`cancel ${f} ${idempotencyKey}`) },
    );
    const hotel = await ctx.step(
      'hotel',
      ({ idempotencyKey }) => {
        effects.push(`book hotel ${idempotencyKey}`);
        return `H${++hotels} in ${input.city}`;
      },
      { compensate: (h: string, { idempotencyKey }) => void effects.push(`cancel ${h} ${idempotencyKey}`) },
    );
    const charge = await ctx.step(
      'charge',
      ({ idempotencyKey }) => {
        effects.push(`charge ${idempotencyKey}`);
        return 'C1';
      },
      {
        compensate: async (c: string, { idempotencyKey }) => {
          if (options.refundGate) {
            effects.push('refund held');
            await options.refundGate;
          }
          if (options.refundFails) throw new NonRetryableError('the payment provider refuses refunds today');
          effects.push(`refund ${c} ${idempotencyKey}`);
        },
      },
    );
    await ctx.step('email', ({ idempotencyKey }) => void effects.push(`email ${idempotencyKey}`));
    return `${flight} + ${hotel} + ${charge}`;
  });
  return { wf, effects };
}

describe(`a re-run that undoes first (${TEST_STORE})`, () => {
  it('runs the compensations of the forgotten steps, newest first, then runs again from the step under new keys; the steps before are neither undone nor run', async () => {
    const { wf, effects } = trip();
    const engine = makeEngine({ workflows: [wf] });
    let worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      expect(await engine.result(id)).toBe('F1 + H1 in Oslo + C1');
      // Held until explained: no worker takes it meanwhile.
      await worker.stop();
      const again = await engine.retry(id, { fromStep: 'hotel', compensate: true });
      expect(again.status).toBe('pending');
      expect((await engine.explain(id)).summary).toContain('Re-run from step "hotel", undoing first');
      worker = await startWorker(engine);
      await waitForStatus(engine, id, ['succeeded', 'failed'], 30_000);
      expect(await engine.result(id)).toBe('F1 + H2 in Oslo + C1');
      expect(effects).toEqual([
        `book flight v1:${id}:flight#1`,
        `book hotel v1:${id}:hotel#1`,
        `charge v1:${id}:charge#1`,
        `email v1:${id}:email#1`,
        // The undo: the compensations of the steps from `hotel` on, newest first.
        `refund C1 v1:${id}:compensate:charge#1`,
        `cancel H1 in Oslo v1:${id}:compensate:hotel#1`,
        // The re-run: the undone steps under new keys; `email` has no compensation, so its key stays.
        `book hotel v1:${id}:hotel#1:redo1`,
        `charge v1:${id}:charge#1:redo1`,
        `email v1:${id}:email#1`,
      ]);
      const info = await engine.get(id);
      expect(info.steps.map((s) => `${s.name}:${s.status}`)).toEqual(['flight:completed', 'hotel:completed', 'charge:completed', 'email:completed']);
      const log = transitionsOf(info).map((t) => `${t.event}:${t.from}->${t.to}`);
      expect(log.slice(-5)).toEqual(['retry:succeeded->pending', 'claim:pending->running', 'release:running->pending', 'claim:pending->running', 'complete:running->succeeded']);
      const retry = transitionsOf(info).find((t) => t.event === 'retry');
      expect(retry?.detail).toMatchObject({ fromStep: 'hotel', rerun: 'succeeded', compensate: true, undoing: ['hotel', 'charge', 'email'] });
      const release = transitionsOf(info).find((t) => t.event === 'release');
      expect(release?.detail).toMatchObject({ fromStep: 'hotel', undone: ['charge', 'hotel'], forgotten: ['hotel', 'charge', 'email', 'compensate:charge', 'compensate:hotel'] });
    } finally {
      await worker.stop();
    }
  });

  it('undoes nothing without compensate (the default), and refuses compensate without fromStep, a non-boolean, or a failed task', async () => {
    const { wf, effects } = trip();
    const failing = workflow('fails', async (ctx) => {
      await ctx.step('reserve', () => 'R', { compensate: () => undefined });
      await ctx.step('pay', () => {
        throw new NonRetryableError('card declined');
      });
    });
    const engine = makeEngine({ workflows: [wf, failing] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      await engine.result(id);
      await expect(engine.retry(id, { compensate: true })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringContaining('fromStep') });
      await expect(engine.retry(id, { fromStep: 'hotel', compensate: 'yes' as unknown as boolean })).rejects.toMatchObject({
        code: ERROR_CODES.INVALID_ARGUMENT,
        message: expect.stringContaining('compensate'),
      });
      expect((await engine.get(id)).status).toBe('succeeded');

      await engine.retry(id, { fromStep: 'charge', compensate: false });
      await waitForStatus(engine, id, ['succeeded', 'failed'], 30_000);
      expect(effects.filter((e) => e.startsWith('refund') || e.startsWith('cancel'))).toEqual([]);
      expect(effects.slice(-2)).toEqual([`charge v1:${id}:charge#1`, `email v1:${id}:email#1`]);

      const failed = await engine.start(failing);
      await waitForStatus(engine, failed.id, 'failed');
      await expect(engine.retry(failed.id, { fromStep: 'reserve', compensate: true })).rejects.toMatchObject({
        code: ERROR_CODES.CONFLICT,
        message: expect.stringContaining('its cleanup already ran the compensations'),
      });
      expect((await engine.get(failed.id)).status).toBe('failed');
    } finally {
      await worker.stop();
    }
  });

  it('fails the task when a compensation of the undo fails for good, naming the re-run; the other compensations still run', async () => {
    const { wf, effects } = trip({ refundFails: true });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      await engine.result(id);
      await engine.retry(id, { fromStep: 'hotel', compensate: true });
      await waitForStatus(engine, id, ['failed', 'succeeded'], 30_000);
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error).toMatchObject({
        code: ERROR_CODES.COMPENSATION_FAILED,
        message: expect.stringMatching(/re-run from step "hotel".*refuses refunds/),
        cause: { code: ERROR_CODES.RERUN_UNDOING },
      });
      expect(effects.slice(4)).toEqual([`cancel H1 in Oslo v1:${id}:compensate:hotel#1`]);
      // The journal keeps what was done and undone: nothing was run again.
      expect(info.steps.map((s) => `${s.name}:${s.status}`)).toEqual([
        'flight:completed',
        'hotel:completed',
        'charge:completed',
        'email:completed',
        'compensate:charge:failed',
        'compensate:hotel:completed',
      ]);
    } finally {
      await worker.stop();
    }
  });

  it('a cancel during the undo is a cancel: the run that takes over undoes every completed step, those already undone once', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { wf, effects } = trip({ refundGate: gate });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      await engine.result(id);
      await engine.retry(id, { fromStep: 'hotel', compensate: true });
      // The undo is in its first compensation (the refund, held at the gate).
      await eventually(() => effects.includes('refund held'), 30_000, 'the refund to start');
      expect((await engine.cancel(id, { reason: 'trip called off' })).status).toBe('cancelling');
      open();
      await waitForStatus(engine, id, ['cancelled', 'failed', 'succeeded'], 30_000);
      const info = await engine.get(id);
      expect(info.status).toBe('cancelled');
      expect(effects.slice(4)).toEqual(['refund held', `refund C1 v1:${id}:compensate:charge#1`, `cancel H1 in Oslo v1:${id}:compensate:hotel#1`, `cancel F1 v1:${id}:compensate:flight#1`]);
      expect(info.steps.map((s) => `${s.name}:${s.status}`)).toEqual([
        'flight:completed',
        'hotel:completed',
        'charge:completed',
        'email:completed',
        'compensate:charge:completed',
        'compensate:hotel:completed',
        'compensate:flight:completed',
      ]);
    } finally {
      await worker.stop();
    }
  });

  it('a cancel before a worker takes the re-run goes through cancelling: a worker undoes every completed step', async () => {
    const { wf, effects } = trip();
    const engine = makeEngine({ workflows: [wf] });
    let worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      await engine.result(id);
      await worker.stop();
      await engine.retry(id, { fromStep: 'hotel', compensate: true });
      expect((await engine.cancel(id, { reason: 'changed my mind' })).status).toBe('cancelling');
      worker = await startWorker(engine);
      await waitForStatus(engine, id, ['cancelled', 'failed', 'succeeded'], 30_000);
      expect((await engine.get(id)).status).toBe('cancelled');
      expect(effects.slice(4)).toEqual([`refund C1 v1:${id}:compensate:charge#1`, `cancel H1 in Oslo v1:${id}:compensate:hotel#1`, `cancel F1 v1:${id}:compensate:flight#1`]);
    } finally {
      await worker.stop();
    }
  });

  it('a pause during the undo pauses the task once it is undone; resume runs it from the step', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { wf, effects } = trip({ refundGate: gate });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    try {
      const { id } = await engine.start(wf, { city: 'Oslo' });
      await engine.result(id);
      await engine.retry(id, { fromStep: 'hotel', compensate: true });
      await eventually(() => effects.includes('refund held'), 30_000, 'the refund to start');
      await engine.pause(id);
      open();
      await waitForStatus(engine, id, ['paused', 'succeeded', 'failed'], 30_000);
      const paused = await engine.get(id);
      expect(paused.status).toBe('paused');
      expect(paused.steps.map((s) => s.name)).toEqual(['flight']);
      expect(transitionsOf(paused).at(-1)).toMatchObject({ event: 'suspend', detail: { fromStep: 'hotel', undone: ['charge', 'hotel'] } });
      await engine.resume(id);
      await waitForStatus(engine, id, ['succeeded', 'failed'], 30_000);
      expect(await engine.result(id)).toBe('F1 + H2 in Oslo + C1');
      expect(effects.slice(5)).toEqual([
        `refund C1 v1:${id}:compensate:charge#1`,
        `cancel H1 in Oslo v1:${id}:compensate:hotel#1`,
        `book hotel v1:${id}:hotel#1:redo1`,
        `charge v1:${id}:charge#1:redo1`,
        `email v1:${id}:email#1`,
      ]);
    } finally {
      await worker.stop();
    }
  });
});
