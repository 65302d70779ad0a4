// A cancel of a task no worker holds (waiting, paused, pending) whose last run left cleanup to do:
// it goes through `cancelling`, a worker reclaims it at once and runs its onCancel handlers and
// compensations, as for a running task. Without cleanup to do the cancel stays immediate.
import { describe, expect, it } from 'vitest';
import { Engine, NonRetryableError, workflow, type TaskInfo } from '../src/index.ts';
import { eventually, gate, makeEngine, startWorker, tempDbUrl, TEST_STORE, transitionsOf, waitForStatus } from './support/engine.ts';

function stepNames(info: TaskInfo): string[] {
  return info.steps.map((s) => `${s.name}:${s.status}`);
}

function lastTransitions(info: TaskInfo, n: number): string[] {
  return transitionsOf(info)
    .map((t) => `${t.event}:${t.from}>${t.to}`)
    .slice(-n);
}

/** A workflow that books (compensated), registers an onCancel handler, then waits for an event. */
function bookingThatWaits(effects: string[], name = 'book-then-wait') {
  return workflow(name, async (ctx) => {
    const booking = await ctx.step('book', () => 'B1', { compensate: (b: string) => void effects.push(`unbook ${b}`) });
    ctx.onCancel(async ({ reason }) => {
      await ctx.step('notify', () => void effects.push(`notify: ${reason}`));
    });
    const answer = await ctx.waitForEvent<string>('go');
    return `${booking} ${answer}`;
  });
}

describe('cancelling a task no worker holds, whose last run left cleanup to do', () => {
  it('a waiting task goes through cancelling: a worker reclaims it at once, replays it, runs its onCancel handler and the compensation, and it ends cancelled', async () => {
    const effects: string[] = [];
    const wf = bookingThatWaits(effects);
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    expect(effects).toEqual([]);
    const summary = await engine.cancel(id, { reason: 'customer left', by: 'ops:ana' });
    expect(summary.status).toBe('cancelling');
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(effects).toEqual(['notify: customer left', 'unbook B1']);
    expect(stepNames(info)[0]).toBe('book:completed');
    expect(stepNames(info).filter((s) => s.startsWith('onCancel:') || s.startsWith('compensate:'))).toEqual(['onCancel:notify:completed', 'compensate:book:completed']);
    expect(lastTransitions(info, 3)).toEqual(['cancel:waiting>cancelling', 'reclaim:cancelling>cancelling', 'abort:cancelling>cancelled']);
    const cancel = transitionsOf(info).find((t) => t.event === 'cancel');
    expect(cancel?.actor).toEqual({ kind: 'user', id: 'ops:ana' });
    const reclaim = transitionsOf(info).find((t) => t.event === 'reclaim');
    expect(reclaim?.actor).toEqual({ kind: 'worker', id: worker.id });
    await expect(engine.result(id)).rejects.toMatchObject({ code: 'TASK_CANCELLED', message: expect.stringContaining('customer left') });
    // A late event changes nothing: the task never resumes.
    await expect(engine.signal(id, 'go', 'yes')).rejects.toMatchObject({ code: 'ILLEGAL_TRANSITION' });
  });

  it('a paused task goes through cancelling and its cleanup runs', async () => {
    const effects: string[] = [];
    const inStep = gate();
    const release = gate();
    const wf = workflow('book-then-pause', async (ctx) => {
      await ctx.step('book', () => 'B2', { compensate: (b: string) => void effects.push(`unbook ${b}`) });
      await ctx.step('slow', async () => {
        inStep.open();
        await release.promise;
      });
      await ctx.step('after', () => void effects.push('after'));
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await inStep.promise;
    await engine.pause(id);
    release.open();
    await waitForStatus(engine, id, 'paused');
    expect((await engine.cancel(id)).status).toBe('cancelling');
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(effects).toEqual(['unbook B2']);
    expect(lastTransitions(info, 3)).toEqual(['cancel:paused>cancelling', 'reclaim:cancelling>cancelling', 'abort:cancelling>cancelled']);
  });

  it('a task handed back to pending by a stopping worker goes through cancelling; a worker started later runs the cleanup', async () => {
    const effects: string[] = [];
    const inStep = gate();
    const wf = workflow('book-then-drain', async (ctx) => {
      await ctx.step('book', () => 'B3', { compensate: (b: string) => void effects.push(`unbook ${b}`) });
      await ctx.step(
        'slow',
        ({ signal }) =>
          new Promise((_r, reject) => {
            inStep.open();
            signal.addEventListener('abort', () => reject(signal.reason as Error));
          }),
      );
    });
    const engine = makeEngine({ workflows: [wf] });
    const first = await startWorker(engine, { shutdownGraceMs: 50, cancelGraceMs: 200 });
    const { id } = await engine.start(wf);
    await inStep.promise;
    await first.stop();
    expect((await engine.get(id)).status).toBe('pending');
    expect((await engine.cancel(id, { reason: 'not needed' })).status).toBe('cancelling');
    // No worker runs: the task waits, visibly, for one that serves its workflow.
    const why = await engine.explain(id);
    expect(why.summary).toBe(
      'Cancelling (reason: not needed): waiting for a worker serving "book-then-drain" version 1 to run its cleanup (onCancel handlers, compensations); no live worker serves that version now; if none takes it within a lease period, any worker\'s heartbeat ends it cancelled without running that cleanup.',
    );
    expect(effects).toEqual([]);
    await startWorker(engine);
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    expect((await engine.get(id)).status).toBe('cancelled');
    expect(effects).toEqual(['unbook B3']);
  });

  it('a cancel from another engine (a process with no worker, like the CLI) reaches a worker, which runs the cleanup', async () => {
    const effects: string[] = [];
    const wf = bookingThatWaits(effects, 'book-wait-remote');
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    // On PostgreSQL only the cancel's NOTIFY makes the worker claim soon; SQLite has no channel between processes.
    await startWorker(engine, { pollIntervalMs: TEST_STORE === 'postgres' ? 60_000 : 20 });
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const operator = new Engine({ store: url });
    try {
      expect((await operator.cancel(id, { reason: 'from the CLI' })).status).toBe('cancelling');
      await eventually(async () => (await operator.get(id)).status === 'cancelled', 10_000, 'the cleanup ran');
    } finally {
      await operator.close();
    }
    expect(effects).toEqual(['notify: from the CLI', 'unbook B1']);
  });

  it('a cleanup that fails for good after such a cancel leaves the task failed with COMPENSATION_FAILED', async () => {
    const wf = workflow('undo-fails-after-wait', async (ctx) => {
      await ctx.step('ship', () => 'S1', {
        retry: 1,
        compensate: () => {
          throw new NonRetryableError('parcel already left');
        },
      });
      await ctx.sleep('cool-off', 3_600_000);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await engine.cancel(id, { reason: 'abandon' });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/was cancelled \(reason: abandon\) and could not be fully undone: compensation of "ship": .*parcel already left/),
    });
    expect(lastTransitions(info, 3)).toEqual(['cancel:waiting>cancelling', 'reclaim:cancelling>cancelling', 'fail:cancelling>failed']);
  });

  it('a task waiting on an approval: the cleanup runs, and a decision after the cancel is refused', async () => {
    const effects: string[] = [];
    const wf = workflow('book-then-approve', async (ctx) => {
      await ctx.step('book', () => 'B4', { compensate: (b: string) => void effects.push(`unbook ${b}`) });
      await ctx.approval('go-ahead', { approvers: ['lee'] });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const [approval] = await engine.approvals({ taskId: id });
    await engine.cancel(id);
    await expect(engine.decide(approval!.id, { approve: true, by: 'lee' })).rejects.toMatchObject({ code: 'TASK_ENDED' });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    expect((await engine.get(id)).status).toBe('cancelled');
    expect(effects).toEqual(['unbook B4']);
  });
});

describe('cancelling a task no worker holds, with no cleanup to do', () => {
  it('is immediate when the run registered neither onCancel handlers nor compensations', async () => {
    const wf = workflow('plain-wait', async (ctx) => {
      await ctx.step('a', () => 1);
      return ctx.waitForEvent('go');
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.cancel(id)).status).toBe('cancelled');
    expect(lastTransitions(await engine.get(id), 1)).toEqual(['cancel:waiting>cancelled']);
  });

  it('is immediate for a task that never ran, whatever its code would register', async () => {
    const effects: string[] = [];
    const wf = bookingThatWaits(effects, 'never-ran');
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf);
    expect((await engine.cancel(id)).status).toBe('cancelled');
    expect(effects).toEqual([]);
  });
});

describe('a cancelled waiting task that no worker of its version takes over', () => {
  it('ends cancelled after a further leaseMs, noting that its cleanup did not run and why', async () => {
    const effects: string[] = [];
    const other = workflow('other-wf', async (ctx) => ctx.step('a', () => 1));
    const wf = bookingThatWaits(effects, 'left-alone');
    const engine = makeEngine({ workflows: [wf, other] });
    const served = await startWorker(engine, { workflows: ['left-alone'] });
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await served.stop();
    await startWorker(engine, { workflows: ['other-wf'], leaseMs: 400, heartbeatMs: 50 });
    await engine.cancel(id);
    await waitForStatus(engine, id, 'cancelled');
    expect(effects).toEqual([]);
    const last = transitionsOf(await engine.get(id)).at(-1);
    expect(last).toMatchObject({ event: 'abort', from: 'cancelling', to: 'cancelled', actor: { kind: 'system', id: 'lease-expiry' } });
    expect(last?.detail).toMatchObject({
      previousOwner: null,
      note: expect.stringMatching(/its cleanup \(onCancel handlers, compensations\) did not run: no worker of workflow "left-alone" version 1 took the task over within 400 ms/),
    });
  });
});
