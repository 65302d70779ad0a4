import { describe, expect, it } from 'vitest';
import { NonRetryableError, workflow, type Engine, type TaskInfo, type WorkerOptions } from '../src/index.ts';
import { sourcesOf, transition } from '../src/lifecycle.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, gate, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';

function stepNames(info: TaskInfo): string[] {
  return info.steps.map((s) => `${s.name}:${s.status}`);
}

describe('cancel cleanup and compensation', () => {
  it('runs ctx.onCancel after a cancel in a scope the cancel does not interrupt; its ctx.step is recorded', async () => {
    const started = gate();
    const released: string[] = [];
    const wf = workflow('locked-job', async (ctx) => {
      const lock = await ctx.step('lock', () => 'lock-7');
      ctx.onCancel(async ({ reason, signal }) => {
        expect(signal.aborted).toBe(false);
        await ctx.step('release', () => void released.push(`${lock}:${reason}`));
      });
      return ctx.step(
        'work',
        ({ signal }) =>
          new Promise((_r, reject) => {
            started.open();
            signal.addEventListener('abort', () => reject(signal.reason as Error));
          }),
      );
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.cancel(id, { reason: 'user asked' });
    await waitForStatus(engine, id, 'cancelled');
    expect(released).toEqual(['lock-7:user asked']);
    const info = await engine.get(id);
    // The handler's step is named after its scope, with its own idempotency key.
    expect(stepNames(info)).toEqual(['lock:completed', 'onCancel:release:completed']);
    expect(info.steps[1]?.idempotencyKey).toBe(`v1:${id}:onCancel:release#1`);
    expect(info.history.some((e) => e.type === 'step:completed' && e.step.name === 'onCancel:release')).toBe(true);
  });

  it('runs the compensations of completed steps in reverse order when the task fails for good, each a recorded, retried step', async () => {
    const undone: string[] = [];
    let flaky = 0;
    const wf = workflow('trip', async (ctx) => {
      const hotel = await ctx.step('hotel', () => ({ booking: 'H1' }), { compensate: (out: { booking: string }) => void undone.push(`hotel ${out.booking}`) });
      await ctx.step('flight', () => ({ booking: 'F9' }), {
        retry: { maxAttempts: 3, initialDelay: 1 },
        compensate: (out: { booking: string }, s) => {
          if (++flaky === 1) throw new Error('airline API timeout'); // the compensation is retried
          undone.push(`flight ${out.booking} (${s.idempotencyKey.slice(s.idempotencyKey.indexOf(':compensate:') + 1)})`);
        },
      });
      await ctx.step('charge', () => {
        throw new NonRetryableError('card declined');
      });
      return hotel;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    expect(undone).toEqual(['flight F9 (compensate:flight#1)', 'hotel H1']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/card declined/);
    expect(stepNames(info)).toEqual(['hotel:completed', 'flight:completed', 'charge:failed', 'compensate:flight:completed', 'compensate:hotel:completed']);
    expect(info.steps.find((s) => s.name === 'compensate:flight')?.attempts).toBe(2);
  });

  it('fails the task with COMPENSATION_FAILED, both errors and a manual-cleanup note when a compensation fails for good', async () => {
    const undone: string[] = [];
    const wf = workflow('half-undone', async (ctx) => {
      await ctx.step('reserve', () => 'R1', { compensate: () => void undone.push('reserve') });
      await ctx.step('ship', () => 'S1', {
        retry: 1,
        compensate: () => {
          throw new NonRetryableError('parcel already left the depot');
        },
      });
      await ctx.step('invoice', () => {
        throw new NonRetryableError('tax service refused');
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(undone).toEqual(['reserve']); // the others still run
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/failed \(.*tax service refused\) and could not be fully undone: compensation of "ship": .*parcel already left the depot\. Manual cleanup is needed\./),
      cause: { code: 'STEP_FAILED' },
      data: { cancelled: false, failedCompensations: 'ship' },
    });
    // result() rejects with that error itself: people must act on it.
    await expect(engine.result(id)).rejects.toMatchObject({ code: 'COMPENSATION_FAILED', message: info.status === 'failed' ? info.error.message : '' });
    expect((await engine.explain(id)).summary).toMatch(/^Failed, and its cleanup failed too: .* retry it to run again from the failed step\.$/);
    // A retry forgets the cleanup of the failure it retries: it runs again if the task fails again.
    // `reserve` was undone: it runs again, and so does what followed it (`ship` too, whose undo failed).
    await engine.retry(id);
    await waitForStatus(engine, id, 'failed');
    const again = await engine.get(id);
    expect(transitionsOf(again).find((t) => t.event === 'retry')?.detail).toMatchObject({
      fromStep: 'reserve',
      undone: ['reserve'],
      forgotten: ['reserve', 'ship', 'invoice', 'compensate:ship', 'compensate:reserve'],
    });
    expect(undone).toEqual(['reserve', 'reserve']);
    expect(stepNames(again)).toEqual(['reserve:completed', 'ship:completed', 'invoice:failed', 'compensate:ship:failed', 'compensate:reserve:completed']);
  });

  it('a cancelled task whose cleanup fails for good ends failed (cancelling → failed) with COMPENSATION_FAILED naming the cancel and each failure; result(), get, the log and explain show it; it is not retried', async () => {
    const undone: string[] = [];
    const started = gate();
    const ends: string[] = [];
    const wf = workflow('cancel-undo-fails', async (ctx) => {
      await ctx.step('reserve', () => 'R1', { compensate: () => void undone.push('reserve') });
      await ctx.step('ship', () => 'S1', {
        retry: 1,
        compensate: () => {
          throw new NonRetryableError('parcel already left the depot');
        },
      });
      ctx.onCancel(() =>
        ctx.step(
          'notify',
          () => {
            throw new NonRetryableError('mail server down');
          },
          { retry: 1 },
        ),
      );
      await ctx.step(
        'work',
        ({ signal }) =>
          new Promise((_r, reject) => {
            started.open();
            signal.addEventListener('abort', () => reject(signal.reason as Error));
          }),
      );
    });
    const engine = makeEngine({ workflows: [wf], observers: [{ onRunEnd: (r) => void ends.push(r.status) }] });
    const worker = await startWorker(engine);
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.cancel(id, { reason: 'customer changed plans' });
    await waitForStatus(engine, id, ['failed', 'cancelled']);
    await worker.stop();
    expect(undone).toEqual(['reserve']); // every compensation is tried
    const info = await engine.get(id);
    expect(info.status).toBe('failed');
    expect(info.cancelReason).toBe('customer changed plans');
    const message =
      /^Task \S+ was cancelled \(reason: customer changed plans\) and could not be fully undone: onCancel cleanup: .*mail server down; compensation of "ship": .*parcel already left the depot\. Manual cleanup is needed\.$/;
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(message),
      cause: { code: 'TASK_CANCELLED', message: expect.stringContaining('customer changed plans') },
      data: { cancelled: true, cancelReason: 'customer changed plans', failedCompensations: 'onCancel, ship' },
    });
    expect(stepNames(info)).toEqual(['reserve:completed', 'ship:completed', 'onCancel:notify:failed', 'compensate:ship:failed', 'compensate:reserve:completed']);
    await expect(engine.result(id)).rejects.toMatchObject({ code: 'COMPENSATION_FAILED', message: expect.stringMatching(message) });
    // The log: the cancel by the user, then the worker's `fail` from cancelling.
    const [cancel, fail] = transitionsOf(info).slice(-2);
    expect(cancel).toMatchObject({ event: 'cancel', from: 'running', to: 'cancelling', actor: { kind: 'user' } });
    expect(fail).toMatchObject({
      event: 'fail',
      from: 'cancelling',
      to: 'failed',
      actor: { kind: 'worker', id: worker.id },
      detail: { reason: 'customer changed plans', error: expect.stringMatching(message) },
    });
    expect(ends).toEqual(['failed']);
    // Explain says what happened and what to do; retry is not offered, and refused.
    const why = await engine.explain(id);
    expect(why.summary).toMatch(/^Failed in its cleanup after a cancel \(reason: customer changed plans\): .*Manual cleanup is needed\. A cancelled task is not retried/);
    expect(why.legalEvents).toEqual([]);
    await expect(engine.retry(id)).rejects.toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/was cancelled and its cleanup then failed: a cancelled task never resumes/) });
    expect((await engine.get(id)).status).toBe('failed');
  });

  it("a worker stopping in the middle of the cleanup leaves the task cancelling; the worker that takes it over resumes the cleanup, by name: what the first one completed is not run again, and the code's late call was never run", async () => {
    const effects: string[] = [];
    const entered = gate();
    const late = gate<string>();
    const drainStarted = gate();
    const refused = gate<unknown>();
    let first = true;
    const wf = workflow('handed-over-cleanup', async (ctx) => {
      await ctx.step('book', () => 'B1', { compensate: () => void effects.push('unbook') });
      ctx.onCancel(async () => {
        await ctx.step('release', () => void effects.push('release'));
        await ctx.step('drain', ({ signal }) => {
          effects.push('drain-start');
          if (!first) return void effects.push('drain');
          drainStarted.open();
          return new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
        });
      });
      try {
        await ctx.step('work', () => {
          entered.open();
          return late.promise; // ignores its signal: settles during the cleanup
        });
      } catch {
        // The code goes on after its late result, while its cleanup runs: this call is refused.
        const after = ctx.step('log-stop', () => void effects.push('log-stop'));
        refused.open(await after.catch((e: unknown) => e));
      }
    });
    const engine = makeEngine({ workflows: [wf] });
    const a = await startWorker(engine, { cancelGraceMs: 100, shutdownGraceMs: 100, leaseMs: 1000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id, { reason: 'stop' });
    await drainStarted.promise;
    late.open('too late');
    expect(await refused.promise).toMatchObject({ code: 'TASK_CANCELLED' });
    await a.stop();
    // No end written: the task is still cancelling, its cleanup half done.
    const between = await engine.get(id);
    expect(between.status).toBe('cancelling');
    expect(stepNames(between)).toEqual(['book:completed', 'onCancel:release:completed']);
    first = false;
    await startWorker(engine, { leaseMs: 1000 });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(effects).toEqual(['release', 'drain-start', 'drain-start', 'drain', 'unbook']);
    expect(stepNames(info)).toEqual(['book:completed', 'onCancel:release:completed', 'onCancel:drain:completed', 'compensate:book:completed']);
    expect(
      transitionsOf(info)
        .map((t) => `${t.event}:${t.to}`)
        .slice(-3),
    ).toEqual(['cancel:cancelling', 'reclaim:cancelling', 'abort:cancelled']);
  });

  it('a worker whose grace period ends before the cleanup has begun leaves the whole cleanup to the worker that takes the task over', async () => {
    const effects: string[] = [];
    const entered = gate();
    const wf = workflow('cleanup-left-over', async (ctx) => {
      await ctx.step('book', () => 'B1', { compensate: () => void effects.push('unbook') });
      ctx.onCancel(() => ctx.step('release', () => void effects.push('release')));
      await ctx.step('work', () => {
        entered.open();
        return new Promise(() => undefined); // ignores its signal: the cancel waits out the grace period
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    const a = await startWorker(engine, { cancelGraceMs: 1000, shutdownGraceMs: 50, leaseMs: 1000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id);
    await a.stop(); // its grace period ends while the cancelled run still waits for its step
    expect(effects).toEqual([]);
    expect((await engine.get(id)).status).toBe('cancelling');
    await startWorker(engine, { leaseMs: 1000 });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    expect((await engine.get(id)).status).toBe('cancelled');
    expect(effects).toEqual(['release', 'unbook']);
  });

  it('a task woken past its deadline still compensates the steps it completed: its code replays what it recorded and makes no new call', async () => {
    const clock = new ManualClock();
    const undone: string[] = [];
    let after = 0;
    const wf = workflow(
      'late-undo',
      async (ctx) => {
        await ctx.step('create-vm', () => 'vm-1', { compensate: (vm: string) => void undone.push(`delete ${vm}`) });
        await ctx.sleep('nap', '7d');
        await ctx.step('after', () => ++after);
      },
      { timeout: '1d' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1d');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
    expect(undone).toEqual(['delete vm-1']);
    expect(after).toBe(0);
    expect(stepNames(info)).toEqual(['create-vm:completed', 'nap:waiting', 'compensate:create-vm:completed']);
  });

  it('runs compensations after a cancel too, and after a deadline', async () => {
    const clock = new ManualClock();
    const undone: string[] = [];
    const started = gate();
    const wf = workflow(
      'undo-on-stop',
      async (ctx) => {
        await ctx.step('create-vm', () => 'vm-1', { compensate: (vm: string) => void undone.push(`delete ${vm}`) });
        await ctx.step(
          'provision',
          ({ signal }) =>
            new Promise((_r, reject) => {
              started.open();
              signal.addEventListener('abort', () => reject(signal.reason as Error));
            }),
        );
      },
      { timeout: '1h' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000 });
    const a = await engine.start(wf);
    await started.promise;
    await engine.cancel(a.id);
    await waitForStatus(engine, a.id, 'cancelled');
    expect(undone).toEqual(['delete vm-1']);
    const b = await engine.start(wf);
    await eventually(async () => (await engine.get(b.id)).steps.length === 1, 10_000, 'the vm created');
    await clock.advance('1h');
    await waitForStatus(engine, b.id, 'failed');
    const info = await engine.get(b.id);
    expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
    expect(undone).toEqual(['delete vm-1', 'delete vm-1']);
    expect(stepNames(info)).toEqual(['create-vm:completed', 'compensate:create-vm:completed']);
  });

  it('a step that ignores its signal keeps the task cancelling until the grace period ends; its late result is refused; onCancel still runs', async () => {
    const entered = gate();
    const late = gate<string>();
    const cleaned: string[] = [];
    const wf = workflow('stubborn-cleanup', async (ctx) => {
      ctx.onCancel(() => ctx.step('cleanup', () => void cleaned.push('done')));
      return ctx.step('ignore-signal', () => {
        entered.open();
        return late.promise; // does not listen to its signal
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { cancelGraceMs: 200 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id);
    expect((await engine.get(id)).status).toBe('cancelling');
    await waitForStatus(engine, id, 'cancelled');
    late.open('too late');
    expect(cleaned).toEqual(['done']);
    const info = await engine.get(id);
    expect(stepNames(info)).toEqual(['onCancel:cleanup:completed']);
  });

  it('stops a cleanup that runs past its own deadline (cleanupTimeout, on the engine clock): the cancelled task fails with COMPENSATION_FAILED, naming the deadline and what did not run', async () => {
    const clock = new ManualClock();
    const entered = gate();
    const cleanupStarted = gate();
    const reasons: string[] = [];
    const undone: string[] = [];
    const wf = workflow(
      'slow-cleanup',
      async (ctx) => {
        await ctx.step('vm', () => 'vm-1', { compensate: (vm: string) => void undone.push(vm) });
        ctx.onCancel(() =>
          ctx.step(
            'drain-queue',
            ({ signal }) =>
              new Promise((_r, reject) => {
                cleanupStarted.open();
                signal.addEventListener('abort', () => {
                  reasons.push((signal.reason as Error).message);
                  reject(signal.reason as Error);
                });
              }),
            { retry: 1 },
          ),
        );
        await ctx.step(
          'work',
          ({ signal }) =>
            new Promise((_r, reject) => {
              entered.open();
              signal.addEventListener('abort', () => reject(signal.reason as Error));
            }),
        );
      },
      { cleanupTimeout: '5m' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id, { reason: 'too slow' });
    await cleanupStarted.promise;
    await clock.advance('5m');
    await waitForStatus(engine, id, 'failed');
    expect(reasons).toEqual([expect.stringMatching(/cleanup of task .* ran past its 300000 ms deadline/)]);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(
        /was cancelled \(reason: too slow\) and could not be fully undone: onCancel cleanup: .*ran past its 300000 ms deadline.*compensation of "vm": not run: .*Manual cleanup is needed\./,
      ),
      cause: { code: 'TASK_CANCELLED' },
    });
    expect(undone).toEqual([]); // past the deadline nothing more runs
    expect(stepNames(info)).toEqual(['vm:completed', 'onCancel:drain-queue:failed']);
  });

  it('refuses the late result of a step that ignored its signal even when it arrives during the cleanup', async () => {
    const entered = gate();
    const late = gate<string>();
    const wf = workflow('late-in-cleanup', async (ctx) => {
      ctx.onCancel(async () => {
        late.open('arrived during cleanup');
        await new Promise((r) => setTimeout(r, 0));
        await ctx.step('cleanup', () => 'cleaned');
      });
      return ctx.step('ignore-signal', () => {
        entered.open();
        return late.promise;
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { cancelGraceMs: 100 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id);
    await waitForStatus(engine, id, 'cancelled');
    expect(stepNames(await engine.get(id))).toEqual(['onCancel:cleanup:completed']);
  });
});

describe('a cancelling task whose worker died', () => {
  /** Claims the task as a worker that then dies (it never heartbeats again), and cancels it. */
  async function claimByDeadWorker(engine: Engine, id: string, workflowName: string): Promise<void> {
    const store = await engine.ready();
    const reclaimFrom = sourcesOf('reclaim');
    const claimed = await store.claim({
      workerId: 'dead-worker',
      now: engine.clock.now(),
      leaseMs: 200,
      limit: 1,
      workflows: [workflowName],
      claim: { from: sourcesOf('claim'), to: 'running' },
      reclaim: { from: reclaimFrom, to: Object.fromEntries(reclaimFrom.map((s) => [s, transition({ status: s }, 'reclaim').to])) },
    });
    expect(claimed.map((c) => c.task.id)).toEqual([id]);
    await engine.cancel(id, { reason: 'stop' });
    expect((await engine.get(id)).status).toBe('cancelling');
  }

  it("ends cancelled, noting that its cleanup did not run and why, when no worker serving its workflow takes it over: any worker's heartbeat does it once the lease has been expired for a further leaseMs", async () => {
    const ran: string[] = [];
    const other = workflow('other', async (ctx) => ctx.step('a', () => 1));
    const gone = workflow('gone', async (ctx) => {
      ctx.onCancel(() => void ran.push('onCancel'));
      await ctx.step('a', () => 1);
    });
    const engine = makeEngine({ workflows: [other, gone] });
    const { id } = await engine.start(gone);
    await claimByDeadWorker(engine, id, 'gone');
    await eventually(async () => (await engine.explain(id)).summary.includes('expired'), 10_000, 'the lease expired');
    expect((await engine.explain(id)).summary).toMatch(
      /no live worker serves version 1 of "gone", so none can take it over and finish its cleanup: once the lease has been expired for a further lease period, any worker's heartbeat ends the task cancelled without running its cleanup/,
    );
    await startWorker(engine, { workflows: ['other'], leaseMs: 600, heartbeatMs: 50 });
    await waitForStatus(engine, id, 'cancelled');
    const info = await engine.get(id);
    expect(ran).toEqual([]);
    const last = transitionsOf(info).at(-1);
    expect(last).toMatchObject({ event: 'abort', from: 'cancelling', to: 'cancelled', actor: { kind: 'system', id: 'lease-expiry' } });
    expect(last?.detail).toEqual({
      reason: 'lease expired',
      previousOwner: 'dead-worker',
      note: 'its cleanup (onCancel handlers, compensations) did not run: no worker of workflow "gone" version 1 took the task over within 600 ms of its lease expiring',
    });
    await expect(engine.result(id)).rejects.toMatchObject({ code: 'TASK_CANCELLED' });
  });

  it('is taken over by a worker serving its workflow, which runs the cleanup: the fallback of other workers does not race it', async () => {
    const ran: string[] = [];
    const other = workflow('other', async (ctx) => ctx.step('a', () => 1));
    const served = workflow('served', async (ctx) => {
      ctx.onCancel(() => ctx.step('release', () => void ran.push('release')));
      await ctx.step('a', () => 1);
    });
    const engine = makeEngine({ workflows: [other, served] });
    const { id } = await engine.start(served);
    // Both workers heartbeat (and would end the task) once the lease has been expired for their
    // lease period; the worker serving it reclaims it within a poll of the expiry. That period is
    // long (5 s): a busy machine may take a good part of a second to start the serving worker, and
    // the test is about who acts first, not about how quickly a worker starts.
    await startWorker(engine, { workflows: ['other'], leaseMs: 5000, heartbeatMs: 50 });
    await claimByDeadWorker(engine, id, 'served');
    await startWorker(engine, { workflows: ['served'], leaseMs: 5000, heartbeatMs: 50 });
    await waitForStatus(engine, id, ['cancelled', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('cancelled');
    expect(ran).toEqual(['release']);
    expect(stepNames(info)).toEqual(['onCancel:release:completed']);
    expect(
      transitionsOf(info)
        .map((t) => `${t.event}:${t.to}`)
        .slice(-3),
    ).toEqual(['cancel:cancelling', 'reclaim:cancelling', 'abort:cancelled']);
  });
});

describe('compensations after a failure for good while the run is asked to stop starting work', () => {
  function failingSaga(name: string, undone: string[], started: { open: () => void }, go: Promise<void>) {
    return workflow(name, async (ctx) => {
      await ctx.step('book', () => 'B1', { compensate: (b: string) => void undone.push(`unbook ${b}`) });
      await ctx.step('pay', async () => {
        started.open();
        await go;
        throw new NonRetryableError('card declined');
      });
    });
  }

  it("a step that fails for good while a pause is requested: the compensations run and the task fails with the step's error", async () => {
    const undone: string[] = [];
    const started = gate();
    const go = gate();
    const wf = failingSaga('pause-then-fail', undone, started, go.promise);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await started.promise;
    await engine.pause(id); // reaches the run in this process before pause() returns
    go.open();
    await waitForStatus(engine, id, ['failed', 'paused', 'cancelled']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/card declined/);
    expect(undone).toEqual(['unbook B1']);
    expect(stepNames(info)).toEqual(['book:completed', 'pay:failed', 'compensate:book:completed']);
    expect(info.pauseRequested).toBe(false);
  });

  it('a step that fails for good while the worker drains (worker.stop()): the compensations run within the grace period and the task fails', async () => {
    const undone: string[] = [];
    const started = gate();
    const go = gate();
    const wf = failingSaga('drain-then-fail', undone, started, go.promise);
    const engine = makeEngine({ workflows: [wf] });
    const w = await startWorker(engine, { shutdownGraceMs: 10_000 });
    const { id } = await engine.start(wf);
    await started.promise;
    const stopping = w.stop(); // drains at once
    go.open();
    await stopping;
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/card declined/);
    expect(undone).toEqual(['unbook B1']);
    expect(stepNames(info)).toEqual(['book:completed', 'pay:failed', 'compensate:book:completed']);
  });
});

describe('a resumed cleanup while the replay waits for a call the code no longer makes', () => {
  /**
   * The first run: Z completes, A wins a race against C, B completes, the code awaits C; the task is cancelled,
   * C stops, and the worker stops in the middle of compensate:A (no end written). The second run
   * knows of the cancel from its start, so C is refused at once and the race ends: the code is
   * handed back A (registering A's compensation) and never asks for B, which the replay expects
   * next. Its cleanup then runs compensate:A again, as `second(attempt)` says, then compensate:Z.
   */
  async function resumedRaceSaga(name: string, second: (attempt: number) => Promise<void>, worker2: WorkerOptions): Promise<TaskInfo> {
    let first = true;
    let attempts = 0;
    const compensating = gate();
    const wf = workflow(name, async (ctx) => {
      await ctx.step('Z', () => 'z', { compensate: () => undefined });
      const c = ctx.step('C', ({ signal }) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })));
      const a = ctx.step('A', () => 'a', {
        retry: { maxAttempts: 2, initialDelay: '300ms', jitter: false },
        compensate: (_o: unknown, { signal }) => {
          if (!first) return second(++attempts);
          compensating.open();
          return new Promise<void>((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
        },
      });
      await Promise.race([a, c]);
      await ctx.step('B', () => 'b');
      await c;
    });
    const engine = makeEngine({ workflows: [wf] });
    const w1 = await startWorker(engine, { leaseMs: 1000, cancelGraceMs: 100, shutdownGraceMs: 100 });
    const { id } = await engine.start(wf);
    await eventually(async () => (await engine.get(id)).steps.some((s) => s.name === 'B' && s.status === 'completed'), 10_000, 'B completed');
    await engine.cancel(id, { reason: 'user' });
    await compensating.promise;
    await w1.stop(); // its grace period ends in the middle of compensate:A: the run writes no end
    expect((await engine.get(id)).status).toBe('cancelling');
    first = false;
    await startWorker(engine, { leaseMs: 1000, ...worker2 });
    await waitForStatus(engine, id, ['cancelled', 'failed'], 20_000);
    return engine.get(id);
  }

  it("a cleanup longer than the replay's stall timeout is no divergence: the task ends cancelled after its compensation", async () => {
    const info = await resumedRaceSaga(
      'stall-in-cleanup',
      async () => {
        await new Promise((r) => setTimeout(r, 500)); // well past the 50 ms stall timeout
      },
      { replayStallMs: 50 },
    );
    expect(info.status === 'failed' && info.error.message).toBe(false);
    expect(info.status).toBe('cancelled');
    expect(stepNames(info).filter((n) => n.startsWith('compensate:'))).toEqual(['compensate:A:completed', 'compensate:Z:completed']);
  });

  it('a cleanup step that waits (a retry backoff longer than parkAfterMs) while the replay is pending is no divergence', async () => {
    const info = await resumedRaceSaga(
      'wait-in-cleanup',
      async (attempt) => {
        if (attempt === 1) throw new Error('airline API down');
      },
      { parkAfterMs: 50 },
    );
    expect(info.status === 'failed' && info.error.message).toBe(false);
    expect(info.status).toBe('cancelled');
    expect(stepNames(info).filter((n) => n.startsWith('compensate:'))).toEqual(['compensate:A:completed', 'compensate:Z:completed']);
  });
});

describe("the cleanup's deadline bounds handlers and compensations that ignore their signal", () => {
  it('an onCancel handler that ignores its signal is left behind at the deadline (plus cancelGraceMs): the task fails with COMPENSATION_FAILED naming it, the compensations are not run', async () => {
    const clock = new ManualClock();
    const entered = gate();
    const handlerStarted = gate();
    const never = gate();
    const undone: string[] = [];
    const wf = workflow(
      'deaf-handler',
      async (ctx) => {
        await ctx.step('vm', () => 'vm-1', { compensate: (vm: string) => void undone.push(vm) });
        ctx.onCancel(async () => {
          handlerStarted.open();
          await never.promise; // ignores its signal
          await ctx.step('late', () => undefined); // refused: the cleanup is over
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
      { cleanupTimeout: '5m' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000, cancelGraceMs: 100 });
    const { id } = await engine.start(wf);
    await entered.promise;
    await engine.cancel(id, { reason: 'stop' });
    await handlerStarted.promise;
    await clock.advance('5m');
    await waitForStatus(engine, id, ['failed', 'cancelled']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/onCancel cleanup: did not finish: .*ran past its 300000 ms deadline; it ignored its signal.*compensation of "vm": not run: /),
    });
    expect(undone).toEqual([]);
    never.open();
    await new Promise((r) => setTimeout(r, 50));
    expect(stepNames(await engine.get(id))).toEqual(['vm:completed']);
  });

  it('a compensation that ignores its signal is stopped at the deadline (a step, abandoned after cancelGraceMs): the task fails with COMPENSATION_FAILED naming it and its own error', async () => {
    const clock = new ManualClock();
    const compensating = gate();
    const wf = workflow(
      'deaf-compensation',
      async (ctx) => {
        await ctx.step('vm', () => 'vm-1', { compensate: () => new Promise(() => compensating.open()) }); // never settles
        await ctx.step('pay', () => {
          throw new NonRetryableError('card declined');
        });
      },
      { cleanupTimeout: '1m' },
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000, cancelGraceMs: 100 });
    const { id } = await engine.start(wf);
    await compensating.promise;
    await clock.advance('1m');
    await waitForStatus(engine, id, ['failed']);
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({
      code: 'COMPENSATION_FAILED',
      message: expect.stringMatching(/card declined.*compensation of "vm": .*ran past its 60000 ms deadline/s),
    });
  });
});
