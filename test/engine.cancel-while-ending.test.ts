// A cancel that reaches a task while its run is ending: committed after the run last heard news
// (inside its last step, or between the last step's return and the run's final write). The run's
// final write is fenced off by the `cancelling` status; the cancel must then win with its cleanup
// (onCancel handlers, compensations of the completed steps) and keep its reason.
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow, type TaskInfo } from '../src/index.ts';
import { beforeEachWrite, gate, makeEngine, startWorker, tempDbUrl, transitionsOf, waitForStatus } from './support/engine.ts';

/** A saga of three bookings, each compensated, with an onCancel handler; the last booking waits on `lastStep`. */
function saga(name: string, effects: string[], lastStep: () => Promise<void>) {
  return workflow(name, async (ctx) => {
    ctx.onCancel(({ reason }) => void effects.push(`onCancel: ${reason}`));
    const undo = (what: string) => ({ compensate: () => void effects.push(`cancel ${what}`) });
    await ctx.step('flight', () => void effects.push('book flight'), undo('flight'));
    await ctx.step('hotel', () => void effects.push('book hotel'), undo('hotel'));
    await ctx.step(
      'car',
      async () => {
        await lastStep();
        effects.push('book car');
      },
      undo('car'),
    );
    return 'booked';
  });
}

/** Every booking undone once, after the onCancel handler with the cancel's reason. */
const CLEANED_UP = ['onCancel: customer left', 'cancel car', 'cancel hotel', 'cancel flight'];

function cleanupOf(effects: string[]): string[] {
  return effects.filter((e) => !e.startsWith('book '));
}

async function expectCancelledWithCleanup(engine: Engine, id: string, effects: string[]): Promise<TaskInfo> {
  await waitForStatus(engine, id, ['cancelled', 'failed', 'succeeded']);
  const info = await engine.get(id);
  expect(info.status).toBe('cancelled');
  expect(effects.filter((e) => e.startsWith('book '))).toEqual(['book flight', 'book hotel', 'book car']);
  expect(cleanupOf(effects)).toEqual(CLEANED_UP);
  const abort = transitionsOf(info).find((t) => t.event === 'abort');
  expect(abort?.detail).toEqual({ reason: 'customer left' });
  await expect(engine.result(id)).rejects.toMatchObject({ code: 'TASK_CANCELLED', message: expect.stringContaining('customer left') });
  return info;
}

describe('a cancel that lands while a run is ending', () => {
  it('a cancel from another engine committed inside the last step: the cancel wins, its onCancel handler and every compensation run once, its reason is kept', async () => {
    const effects: string[] = [];
    const cancelled = gate();
    const entered = gate();
    const wf = saga('saga-cancel-in-last-step', effects, async () => {
      entered.open();
      await cancelled.promise;
    });
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    // The heartbeat that would bring the cancel back is far off: the run ends before it hears any news.
    await startWorker(engine, { heartbeatMs: 5000, leaseMs: 30_000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    const operator = new Engine({ store: url });
    try {
      expect((await operator.cancel(id, { reason: 'customer left' })).status).toBe('cancelling');
    } finally {
      await operator.close();
    }
    cancelled.open();
    const info = await expectCancelledWithCleanup(engine, id, effects);
    expect(info.steps.filter((s) => s.name.startsWith('compensate:')).map((s) => `${s.name}:${s.status}`)).toEqual([
      'compensate:car:completed',
      'compensate:hotel:completed',
      'compensate:flight:completed',
    ]);
  });

  it('a cancel committed between the last step’s return and the run’s final write: the cancel wins with its cleanup and reason', async () => {
    const effects: string[] = [];
    const wf = saga('saga-cancel-before-end', effects, async () => undefined);
    const url = tempDbUrl();
    const inner = await openStore(url);
    const operator = new Engine({ store: url });
    let placed = false;
    // The run's final write (`complete`) waits until another engine's cancel has committed.
    const store = beforeEachWrite(inner, async (ops) => {
      const end = ops.find((o) => o.kind === 'transition' && o.event === 'complete');
      if (end && !placed) {
        placed = true;
        await operator.cancel(end.taskId, { reason: 'customer left' });
      }
    });
    const engine = makeEngine({ store, workflows: [wf] });
    try {
      await startWorker(engine, { heartbeatMs: 5000, leaseMs: 30_000 });
      const { id } = await engine.start(wf);
      await expectCancelledWithCleanup(engine, id, effects);
      expect(placed).toBe(true);
    } finally {
      await engine.close();
      await operator.close();
      await inner.close();
    }
  });

  it('a cancel from the same engine heard after the run decided its end: the cancel wins with its cleanup and reason', async () => {
    const effects: string[] = [];
    const wf = saga('saga-cancel-heard-at-end', effects, async () => undefined);
    const inner = await openStore(tempDbUrl());
    let engine: Engine | null = null;
    let placed = false;
    // Before the run's final write (`complete`) is sent, this engine cancels the task: the worker
    // hears of it at once, after the run's end was decided.
    const store = beforeEachWrite(inner, async (ops) => {
      const end = ops.find((o) => o.kind === 'transition' && o.event === 'complete');
      if (end && !placed && engine) {
        placed = true;
        await engine.cancel(end.taskId, { reason: 'customer left' });
      }
    });
    engine = makeEngine({ store, workflows: [wf] });
    try {
      await startWorker(engine, { heartbeatMs: 5000, leaseMs: 30_000 });
      const { id } = await engine.start(wf);
      await expectCancelledWithCleanup(engine, id, effects);
      expect(placed).toBe(true);
    } finally {
      await engine.close();
      await inner.close();
    }
  });

  it('a cancel with no cleanup to do that lands as the run ends: cancelled at once, with its reason', async () => {
    const cancelled = gate();
    const entered = gate();
    const wf = workflow('plain-cancel-in-last-step', async (ctx) => {
      await ctx.step('only', async () => {
        entered.open();
        await cancelled.promise;
      });
      return 'done';
    });
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    await startWorker(engine, { heartbeatMs: 5000, leaseMs: 30_000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    const operator = new Engine({ store: url });
    try {
      await operator.cancel(id, { reason: 'not needed' });
    } finally {
      await operator.close();
    }
    cancelled.open();
    await waitForStatus(engine, id, ['cancelled', 'succeeded', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(transitionsOf(info).find((t) => t.event === 'abort')?.detail).toEqual({ reason: 'not needed' });
    expect(transitionsOf(info).some((t) => t.event === 'release')).toBe(false);
  });
});
