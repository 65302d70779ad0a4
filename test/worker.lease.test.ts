import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow } from '../src/index.ts';
import { eventually, gate, makeEngine, startWorker, tempDbUrl, waitForStatus, transitionsOf } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';
import { ManualClock } from '../src/testing/index.ts';

describe('worker leases', () => {
  it('keeps the lease of a step that runs longer than the lease, by heartbeat', async () => {
    // The step runs 2.5 leases. A heartbeat every 50 ms leaves the lease 900 ms of slack (the run
    // fences itself off two heartbeats before expiry), so a busy machine that delays a beat by a
    // few hundred milliseconds does not make the run give up its task.
    const wf = workflow('long-step', async (ctx) => ctx.step('slow', () => new Promise((r) => setTimeout(() => r('done'), 2500))));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { leaseMs: 1000, heartbeatMs: 50 });
    await startWorker(engine, { leaseMs: 1000, heartbeatMs: 50 }); // would steal an expired lease
    const { id } = await engine.start('long-step');
    expect(await engine.result(id)).toBe('done');
    const info = await engine.get(id);
    expect(info.runs).toBe(1);
    expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'complete']);
  });

  it('does not renew the lease of a run that gave it up, so the task is taken over while that run is still stuck in its step', async () => {
    // The engine's clock jumps past the lease while a step hangs (ignoring its signal), as after a
    // stall: the heartbeat's run gives up its lease. Renewing that lease in the same heartbeat, and
    // in every one after it while the step still hangs, would hold the task for a run that no
    // longer runs it. The lease is left to expire, and the task is reclaimed and finished.
    const clock = new ManualClock(Date.UTC(2030, 0, 1));
    const stuck = gate();
    let calls = 0;
    const wf = workflow('hangs', async (ctx) =>
      ctx.step('call', async () => {
        if (++calls > 1) return 'second run';
        stuck.open();
        return new Promise(() => undefined);
      }),
    );
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 1000, heartbeatMs: 50 });
    const { id } = await engine.start('hangs');
    await stuck.promise;
    await clock.advance('10s');
    expect(await engine.result(id, { timeout: '10s' })).toBe('second run');
    const info = await engine.get(id);
    expect(calls).toBe(2);
    expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'reclaim', 'complete']);
  });

  it('stop() lets an in-flight step finish within the grace period, then releases the task at the next boundary', async () => {
    const inStep = gate();
    const release = gate();
    const runs: string[] = [];
    const wf = workflow('drain', async (ctx) => {
      await ctx.step('one', async () => {
        runs.push('one');
        inStep.open();
        await release.promise;
      });
      await ctx.step('two', () => void runs.push('two'));
      return 'ok';
    });
    const engine = makeEngine({ workflows: [wf] });
    const w1 = await startWorker(engine, { leaseMs: 60_000 });
    const { id } = await engine.start('drain');
    await inStep.promise;
    const stopping = w1.stop({ graceMs: 5000 });
    setTimeout(() => release.open(), 50);
    await stopping;
    const mid = await engine.get(id);
    expect(mid.status).toBe('pending');
    expect(mid.lease).toBeNull();
    expect(mid.steps.map((s) => `${s.name}:${s.status}`)).toEqual(['one:completed']);
    expect(transitionsOf(mid).at(-1)).toMatchObject({ event: 'release', from: 'running', to: 'pending' });
    // Another worker resumes at once (no 60 s lease to wait out) and does not re-run step one.
    await startWorker(engine, { leaseMs: 60_000 });
    expect(await engine.result(id, { timeout: '5s' })).toBe('ok');
    expect(runs).toEqual(['one', 'two']);
  });

  it('stop() aborts a step that outlives the grace period and releases the task', async () => {
    const inStep = gate();
    let reason: unknown;
    const wf = workflow('stuck', async (ctx) =>
      ctx.step('forever', ({ signal, attempt }) => {
        if (attempt > 0 && reason) return 'second run';
        inStep.open();
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject((reason = signal.reason) as Error)));
      }),
    );
    const engine = makeEngine({ workflows: [wf] });
    const w1 = await startWorker(engine, { leaseMs: 60_000 });
    const { id } = await engine.start('stuck');
    await inStep.promise;
    await w1.stop({ graceMs: 100 });
    expect((reason as Error).name).toBe('WorkerStoppingError');
    await waitForStatus(engine, id, 'pending');
    expect(transitionsOf(await engine.get(id)).at(-1)?.detail).toMatchObject({ reason: expect.stringContaining('stopping') });
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '5s' })).toBe('second run');
  });

  it('refuses to start with a heartbeat too slow for its lease', () => {
    const engine = makeEngine({ workflows: [workflow('x', async () => 1)] });
    expect(() => engine.worker({ leaseMs: 1000, heartbeatMs: 400 })).toThrow(/heartbeatMs \(400\) must be at most a third of leaseMs/);
  });

  it('runs at most `concurrency` tasks at once per worker and at most the workflow cap across workers', async () => {
    let running = 0;
    let peak = 0;
    const wf = workflow(
      'capped',
      async (ctx) =>
        ctx.step('work', async () => {
          running++;
          peak = Math.max(peak, running);
          await new Promise((r) => setTimeout(r, 30));
          running--;
        }),
      { concurrency: 3 },
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { concurrency: 2 });
    await startWorker(engine, { concurrency: 2 });
    const ids = await Promise.all(Array.from({ length: 12 }, () => engine.start('capped').then((r) => r.id)));
    for (const id of ids) await engine.result(id, { timeout: '10s' });
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThanOrEqual(2);
  });
});

describe('claims under a backlog', () => {
  it('claims a backlog in batches (not one claim per finished task) and runs every task once', async () => {
    const wf = workflow('quick', async (ctx) => {
      await ctx.step('a', () => 1);
      await ctx.step('b', () => new Promise((r) => setTimeout(() => r(2), Math.random() * 5)));
      return 'ok';
    });
    const inner = await openStore(tempDbUrl());
    const claims: number[] = [];
    const store = spyStore(inner, {
      claim: (original) => async (r) => {
        const got = await original(r);
        if (got.length) claims.push(got.length);
        return got;
      },
    });
    const engine = new Engine({ store, workflows: [wf] });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 200; i++) ids.push((await engine.start(wf)).id);
      // 16 slots and 200 due tasks: runs that finish in the same turn free their slots together.
      const worker = engine.worker({ concurrency: 16, pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000 });
      await worker.start();
      for (const id of ids) expect(await engine.result(id, { timeout: '20s' })).toBe('ok');
      expect(claims.reduce((a, b) => a + b, 0)).toBe(200);
      expect(claims.length).toBeLessThan(200 / 2);
      await worker.stop();
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('fills every free slot with one claim, up to 256 tasks, and never claims more than it can start', async () => {
    const release: Array<() => void> = [];
    const wf = workflow('held', async (ctx) => ctx.step('wait', () => new Promise<number>((r) => release.push(() => r(1)))));
    const inner = await openStore(tempDbUrl());
    const limits: number[] = [];
    const store = spyStore(inner, {
      claim: (original) => async (r) => {
        limits.push(r.limit);
        return original(r);
      },
    });
    const engine = new Engine({ store, workflows: [wf] });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 400; i++) ids.push((await engine.start(wf)).id);
      const worker = engine.worker({ concurrency: 300, pollIntervalMs: 20 });
      let started = 0;
      worker.on('run:claimed', () => started++);
      await worker.start();
      await eventually(() => release.length === 300, 20_000, 'the 300 steps to start');
      expect(limits.slice(0, 2)).toEqual([256, 300 - 256]); // the default batch, then the free slots
      expect(started).toBe(300);
      expect((await engine.list({ status: ['running'], limit: 1000 })).tasks).toHaveLength(300);
      let finished = false;
      const results = Promise.all(ids.map((id) => engine.result(id, { timeout: '20s' }))).finally(() => (finished = true));
      // Each held step is let go as it starts; the freed slots claim the 100 others.
      await eventually(() => (release.splice(0).forEach((go) => go()), finished), 20_000, 'every task to finish');
      expect(await results).toEqual(ids.map(() => 1));
      expect(started).toBe(400);
      expect(Math.max(...limits)).toBe(256);
      await worker.stop();
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('does not look for work when a run finishes and its last claim left nothing behind', async () => {
    const wf = workflow('done-quickly', async (ctx) => ctx.step('a', () => 1));
    const capped = workflow('capped', async (ctx) => ctx.step('a', () => 1), { concurrency: 1 });
    const inner = await openStore(tempDbUrl());
    let claims = 0;
    let ticks = 0;
    const store = spyStore(inner, {
      claim: (original) => async (r) => {
        claims++;
        return original(r);
      },
      // Called by every heartbeat tick of the worker (its sweep of abandoned cancelling tasks).
      expireLeases: (original) => async (r) => {
        ticks++;
        return original(r);
      },
    });
    const ticksAfter = async (n: number): Promise<void> => {
      const from = ticks;
      await eventually(() => ticks >= from + n, 10_000, `${n} heartbeats`);
    };
    let finished = 0;
    const engine = new Engine({ store, workflows: [wf, capped] });
    try {
      const first = await Promise.all([1, 2, 3].map(() => engine.start(wf).then((s) => s.id)));
      // Polls every ten minutes: every claim below is the worker's own decision, not a poll.
      const worker = engine.worker({ concurrency: 8, pollIntervalMs: 600_000, heartbeatMs: 50, leaseMs: 2000 });
      worker.on('run:finished', () => finished++);
      await worker.start();
      for (const id of first) expect(await engine.result(id, { timeout: '20s' })).toBe(1);
      await eventually(() => finished === 3, 10_000, 'the three runs to finish');
      // Two heartbeats later (each one's sweep is counted): a claim the finishes asked for would have been made.
      await ticksAfter(2);
      // One claim took all three (fewer than it asked for): their three finishes claimed nothing.
      expect(claims).toBe(1);
      // New work still wakes it (the engine's bus; on PostgreSQL its NOTIFY comes back too and
      // wakes it a second time); the finish of that run claims nothing more.
      const next = await engine.start(wf);
      expect(await engine.result(next.id, { timeout: '20s' })).toBe(1);
      await eventually(() => finished === 4, 10_000, 'the fourth run to finish');
      await ticksAfter(2);
      expect(claims).toBeGreaterThanOrEqual(2);
      expect(claims).toBeLessThanOrEqual(3);
      // A capped workflow's finished run looks again at once: a task held back by the cap is due.
      const held = await Promise.all([1, 2, 3].map(() => engine.start(capped).then((s) => s.id)));
      for (const id of held) expect(await engine.result(id, { timeout: '20s' })).toBe(1);
      await worker.stop();
    } finally {
      await engine.close();
      await store.close();
    }
  });
});
