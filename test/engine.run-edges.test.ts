// Edge cases of a run: pauses that arrive or are withdrawn at awkward moments, a worker stopping
// while a step finishes, retries after a handled failure, and interleavings that replay must keep.
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { eventually, gate, makeEngine, startWorker, tempDbUrl, waitForStatus, transitionsOf } from './support/engine.ts';

/** Counts turns of the event loop (one tick per turn) from `start()` until `stop()`. */
function turnProbe(): { readonly turns: number; start(): void; reset(): void; stop(): void } {
  let turns = 0;
  let probing = false;
  const tick = (): void => {
    turns++;
    if (probing) setImmediate(tick);
  };
  return {
    get turns() {
      return turns;
    },
    start() {
      probing = true;
      setImmediate(tick);
    },
    reset() {
      turns = 0;
    },
    stop() {
      probing = false;
    },
  };
}

describe('run edges', () => {
  it('lets the event loop in during a long run of instant steps (results are handed over at once only for a while)', async () => {
    const probe = turnProbe();
    let turnsDuringRun = -1;
    const wf = workflow('instant-steps', async (ctx) => {
      // Over twice the 1,024 hand-overs allowed in one macrotask, so at least two cuts by count
      // alone, however fast or slow the machine is.
      for (let i = 0; i < 2100; i++) {
        await ctx.step('s', () => {
          if (i === 0) probe.start();
          if (i === 2099) turnsDuringRun = probe.turns;
          return i;
        });
      }
      return 'done';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    expect(await engine.result(id)).toBe('done');
    probe.stop();
    // A lone step's result skips the turn, but at most 1,024 times or 4 ms in a row: heartbeats,
    // cancels and other tasks' work get in throughout (each turn lets the probe tick once).
    expect(turnsDuringRun).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('lets the event loop in when every step takes over a millisecond of CPU, for one run and for several together', async () => {
    const busy = (ms: number): void => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    const probe = turnProbe();
    const slow = workflow('cpu-steps', async (ctx, input: { n: number; ms: number }) => {
      for (let i = 0; i < input.n; i++) await ctx.step('s', () => busy(input.ms));
      return 'done';
    });
    const engine = makeEngine({ workflows: [slow] });
    await startWorker(engine, { concurrency: 8 });
    try {
      // One run, 1.2 ms per step: hand-overs far apart, yet still in one macrotask unless cut.
      probe.start();
      const one = await engine.start(slow, { n: 200, ms: 1.2 });
      expect(await engine.result(one.id, { timeout: '30s' })).toBe('done');
      expect(probe.turns).toBeGreaterThanOrEqual(20); // ~240 ms of steps, a turn at least every few ms
      // Five runs, 0.3 ms per step: the budget is the process's, not each run's.
      probe.reset();
      const five = await Promise.all(Array.from({ length: 5 }, () => engine.start(slow, { n: 120, ms: 0.3 })));
      for (const t of five) expect(await engine.result(t.id, { timeout: '30s' })).toBe('done');
      expect(probe.turns).toBeGreaterThanOrEqual(20);
    } finally {
      probe.stop();
    }
  });

  it('finishes a task whose pause was withdrawn after a call had already been held back', async () => {
    const calls: string[] = [];
    const started: string[] = [];
    const gateA = gate();
    const gateB = gate();
    const wf = workflow('withdrawn', async (ctx) => {
      await Promise.all([
        ctx.step('A', async () => (started.push('A'), await gateA.promise, calls.push('A'))).then(() => ctx.step('C', () => calls.push('C'))),
        ctx.step('B', async () => (started.push('B'), await gateB.promise, calls.push('B'))),
      ]);
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('withdrawn');
    await eventually(() => started.length === 2, 10_000, 'steps A and B to start');
    expect((await engine.pause(id)).pauseRequested).toBe(true);
    gateA.open();
    // A's result is durable: without the pause, C would be called right after it.
    await eventually(async () => (await engine.get(id)).steps.some((s) => s.name === 'A' && s.status === 'completed'), 10_000, "A's checkpoint");
    const held = await engine.get(id);
    expect(held.status).toBe('running'); // B is still running: the pause waits for it
    expect(held.steps.map((s) => s.name)).not.toContain('C');
    expect(calls).toEqual(['A']);
    await engine.resume(id);
    gateB.open();
    expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
    expect(calls.sort()).toEqual(['A', 'B', 'C']);
    expect(transitionsOf(await engine.get(id)).map((h) => h.event)).toContain('release');
  });

  it('stops paused, not parked, when a pause from another process arrives before the run parks', async () => {
    const url = tempDbUrl();
    const started = gate();
    const finishA = gate();
    const wf = workflow('pause-at-park', async (ctx) => {
      await ctx.step('A', async () => (started.open(), await finishA.promise, 1));
      await ctx.sleep('nap', 1500);
      return ctx.step('B', () => 2);
    });
    const running = new Engine({ store: url, workflows: [wf] });
    const elsewhere = new Engine({ store: url }); // no shared bus: the worker hears of the pause late
    try {
      const w = running.worker({ parkAfterMs: 100, heartbeatMs: 1000, leaseMs: 5000, pollIntervalMs: 20 });
      await w.start();
      const { id } = await running.start(wf);
      await started.promise;
      expect((await elsewhere.pause(id)).pauseRequested).toBe(true);
      finishA.open();
      await waitForStatus(elsewhere, id, ['paused', 'waiting'], 5000);
      const t = await elsewhere.get(id);
      expect(t.status).toBe('paused');
      expect(t.pauseRequested).toBe(false);
      // On SQLite the worker hears of the pause only at its next heartbeat, after the run parked
      // (its wait is kept); on PostgreSQL NOTIFY brings it before the sleep is even called.
      expect(['waiting', undefined]).toContain(t.steps.find((s) => s.name === 'nap')?.status);
      await elsewhere.resume(id);
      expect(await running.result(id, { timeout: '10s' })).toBe(2);
    } finally {
      await running.close();
      await elsewhere.close();
    }
  });

  it('does not record a step that returns after its signal fired (its worker stopped): it runs again on the next worker', async () => {
    let runs = 0;
    const started = gate();
    const finish = gate();
    const returned = gate();
    const wf = workflow('finish-in-grace', async (ctx) => {
      await ctx.step('ignores-signal', async () => {
        runs++;
        started.open();
        if (runs === 1) {
          await finish.promise; // does not listen to its signal
          returned.open();
        }
        return 'done';
      });
      return ctx.step('next', () => 'next');
    });
    const engine = makeEngine({ workflows: [wf] });
    const w1 = await startWorker(engine, { cancelGraceMs: 2000 });
    const { id } = await engine.start('finish-in-grace');
    await started.promise;
    await w1.stop({ graceMs: 0 }); // the signal fires at once; the step returns only afterwards
    finish.open();
    await returned.promise;
    const mid = await engine.get(id);
    expect(mid.status).toBe('pending');
    expect(runs).toBe(1);
    await startWorker(engine);
    expect(await engine.result(id)).toBe('next');
    // What it returned after being told to stop may be cut short: it was not taken as the result.
    expect(runs).toBe(2);
  });

  it('retries from the failed step and forgets the compensation that followed it', async () => {
    let failing = true;
    const log: string[] = [];
    const wf = workflow('compensate', async (ctx) => {
      try {
        await ctx.step(
          'charge',
          () => {
            if (failing) throw new Error('card declined');
            return 'charged';
          },
          { retry: 1 },
        );
      } catch (e) {
        await ctx.step('undo', () => void log.push('undo'));
        throw e;
      }
      return ctx.step('ship', () => 'shipped');
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('compensate');
    await waitForStatus(engine, id, 'failed');
    failing = false;
    await engine.retry(id);
    expect(await engine.result(id)).toBe('shipped');
    expect(log).toEqual(['undo']);
    const info = await engine.get(id);
    expect(info.steps.map((s) => s.name)).toEqual(['charge', 'ship']);
    expect(transitionsOf(info).find((h) => h.event === 'retry')?.detail).toMatchObject({ fromStep: 'charge', forgotten: ['undo'] });
  });

  it('keeps a failure the code handled when retrying a later one', async () => {
    let failLater = true;
    const runs: string[] = [];
    const wf = workflow('handled-then-failed', async (ctx) => {
      const settled = await Promise.allSettled([
        ctx.step(
          'optional',
          () => {
            runs.push('optional');
            throw new Error('nope');
          },
          { retry: 1 },
        ),
        ctx.step('main', () => (runs.push('main'), 'main')),
      ]);
      await ctx.step(
        'later',
        () => {
          runs.push('later');
          if (failLater) throw new Error('later failed');
        },
        { retry: 1 },
      );
      return settled.map((s) => s.status);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('handled-then-failed');
    await waitForStatus(engine, id, 'failed');
    failLater = false;
    await engine.retry(id);
    expect(await engine.result(id)).toEqual(['rejected', 'fulfilled']);
    expect(runs.sort()).toEqual(['later', 'later', 'main', 'optional']); // optional did not run again
  });

  it('replays branches identically when results completed together and one branch awaits in between', async () => {
    const order: string[][] = [];
    let run = -1;
    const wf = workflow('interleave', async (ctx) => {
      order[++run] = [];
      const mine = order[run] as string[];
      await Promise.all([
        (async () => {
          await ctx.step('A', () => 1);
          for (let i = 0; i < 4; i++) await null; // a few plain awaits, as helper code does
          mine.push('x2');
          await ctx.step('x2', () => 1);
        })(),
        (async () => {
          await ctx.step('B', () => 2);
          mine.push('y2');
          await ctx.step('y2', () => 2);
        })(),
      ]);
      await ctx.sleep('nap', 300); // parks: the next run replays everything above
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    // The parked run is not kept in memory, so the next run replays.
    await startWorker(engine, { parkAfterMs: 100, keepParked: 0 });
    const { id } = await engine.start('interleave');
    expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
    expect(order.length).toBeGreaterThanOrEqual(2);
    expect(order[1]).toEqual(order[0]);
  });
});
