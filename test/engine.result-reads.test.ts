// How `result()` learns outcomes: the finished row its own process wrote is handed over without a
// read; reads of many waiters are grouped into one query; a task finished before the call is read
// (and found); a call for a task this engine just created does not read it first, nor polls one
// its own worker runs. Observed by counting store calls (a spy).
import { describe, expect, it } from 'vitest';
import { Engine, StoreUnavailableError, TaskFailedError, openStore, workflow, type Store } from '../src/index.ts';
import { TEST_STORE, eventually, gate, startWorker, tempDbUrl } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const three = workflow('three', async (ctx, input: { n: number }) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  await ctx.step('c', () => 3);
  return input.n;
});
const failing = workflow('failing', async (ctx) => {
  await ctx.step(
    'boom',
    () => {
      throw new Error('boom');
    },
    { retry: { maxAttempts: 1 } },
  );
});
let release = gate();
const held = workflow('held', async (ctx, n: number) => {
  await ctx.step('wait', () => release.promise);
  return n;
});

interface Reads {
  store: Store;
  /** getTask calls (one task each). */
  singles: number;
  /** The ids of each getTasks call. */
  groups: string[][];
  /** When true, reads of tasks fail as if the database were away. */
  refuse: boolean;
  /** When true, reads of tasks never answer (a network that drops packets). */
  hang: boolean;
}

async function spied(): Promise<Reads> {
  const inner = await openStore(tempDbUrl());
  const r: Reads = { store: inner, singles: 0, groups: [], refuse: false, hang: false };
  const down = (): never => {
    throw new StoreUnavailableError('The test store refuses reads');
  };
  r.store = spyStore(inner, {
    getTask: (original) => async (id) => {
      r.singles++;
      if (r.refuse) down();
      return original(id);
    },
    getTasks: (original) => async (ids) => {
      r.groups.push([...ids]);
      if (r.refuse) down();
      if (r.hang) return new Promise<never>(() => undefined);
      return original(ids);
    },
  });
  return r;
}

async function withEngine<T>(r: Reads, fn: (engine: Engine) => Promise<T>): Promise<T> {
  const engine = new Engine({ store: r.store, workflows: [three, failing, held] });
  try {
    return await fn(engine);
  } finally {
    await engine.close();
    await r.store.close();
  }
}

describe(`result() reads (${TEST_STORE})`, () => {
  it('a result() that starts after its task finished reads it and returns it; many such calls share one read', async () => {
    const r = await spied();
    await withEngine(r, async (engine) => {
      await startWorker(engine, { concurrency: 64 });
      const handles = await Promise.all(Array.from({ length: 100 }, (_, i) => engine.start(three, { n: i })));
      const bad = await engine.start(failing);
      const ids = [...handles.map((h) => h.id), bad.id];
      await eventually(async () => (await engine.list({ status: ['succeeded', 'failed'], limit: 1000 })).tasks.length === ids.length, 20_000, 'every task to finish');
      r.singles = 0;
      r.groups.length = 0;
      const settled = await Promise.allSettled(ids.map((id) => engine.result(id, { timeout: '20s' })));
      expect(settled.slice(0, 100)).toEqual(handles.map((_, i) => ({ status: 'fulfilled', value: i })));
      expect((settled[100] as PromiseRejectedResult).reason).toBeInstanceOf(TaskFailedError);
      // One query for the 101 calls made together, none per task.
      expect(r.singles).toBe(0);
      expect(r.groups).toHaveLength(1);
      expect(new Set(r.groups[0])).toEqual(new Set(ids));
    });
  });

  it('a result() for a task its own worker finishes takes the row that worker committed, without reading it back', async () => {
    const r = await spied();
    await withEngine(r, async (engine) => {
      await startWorker(engine, { concurrency: 64 });
      // A first result() opens the subscription to finished tasks where the store has one.
      expect(await engine.result((await engine.start(three, { n: -1 })).id, { timeout: '20s' })).toBe(-1);
      release = gate();
      const handles = await Promise.all(Array.from({ length: 50 }, (_, i) => engine.start(held, i)));
      const results = Promise.all(handles.map((h) => engine.result(h.id, { timeout: '20s' })));
      await eventually(async () => (await engine.list({ status: 'running', limit: 1000 })).tasks.length === 50, 20_000, 'every task to run');
      // From now on every read of a task fails: only the handed-over rows can answer.
      r.refuse = true;
      release.open();
      expect(await results).toEqual(handles.map((_, i) => i));
      r.refuse = false;
    });
  });

  it('result() calls for tasks just started by this engine do not read them first', async () => {
    const r = await spied();
    await withEngine(r, async (engine) => {
      await startWorker(engine, { concurrency: 64 });
      expect(await engine.result((await engine.start(three, { n: -1 })).id, { timeout: '20s' })).toBe(-1);
      release = gate();
      const handles = await Promise.all(Array.from({ length: 20 }, (_, i) => engine.start(held, i)));
      r.singles = 0;
      r.groups.length = 0;
      const results = Promise.all(handles.map((h) => engine.result(h.id, { timeout: '60s' })));
      // Let the calls begin (each would read now if it read first), then look before any poll.
      await new Promise((resolve) => setImmediate(resolve));
      expect(r.singles).toBe(0);
      expect(r.groups).toEqual([]);
      // Nor do their polls read them while this engine's worker runs them: it will announce their end.
      await eventually(async () => (await engine.list({ status: 'running', limit: 1000 })).tasks.length === 20, 20_000, 'every task to run');
      await new Promise((resolve) => setImmediate(resolve));
      r.singles = 0;
      r.groups.length = 0;
      await new Promise((resolve) => setTimeout(resolve, 600)); // past several polls (25 ms and up, or 250 ms and up)
      expect(r.singles).toBe(0);
      expect(r.groups).toEqual([]);
      release.open();
      expect(await results).toEqual(handles.map((_, i) => i));
    });
  });

  it('a read that never answers ends each waiting call at its own timeout, while a call without one keeps waiting', async () => {
    const r = await spied();
    await withEngine(r, async (engine) => {
      const a = await engine.start(three, { n: 1 });
      const b = await engine.start(three, { n: 2 });
      r.hang = true;
      let patientDone = false;
      const patient = engine.result(a.id).finally(() => (patientDone = true));
      patient.catch(() => undefined);
      const short = engine.result(a.id, { timeout: '200ms' }).then(
        () => null,
        (e: unknown) => e,
      );
      const other = engine.result(b.id, { timeout: '300ms' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(await short).toMatchObject({ code: 'TIMEOUT' });
      expect(await other).toMatchObject({ code: 'TIMEOUT' });
      expect(patientDone).toBe(false);
    });
  });

  it('a result() for a task its own worker runs still ends at its timeout, or when its signal aborts', async () => {
    const r = await spied();
    await withEngine(r, async (engine) => {
      await startWorker(engine, { concurrency: 8 });
      expect(await engine.result((await engine.start(three, { n: -1 })).id, { timeout: '20s' })).toBe(-1);
      release = gate();
      const h = await engine.start(held, 7);
      const stop = new AbortController();
      const aborted = engine.result(h.id, { signal: stop.signal }).then(
        () => null,
        (e: unknown) => e,
      );
      const timedOut = engine.result(h.id, { timeout: '300ms' }).then(
        () => null,
        (e: unknown) => e,
      );
      await eventually(async () => (await engine.get(h.id, { steps: false, history: false })).status === 'running', 20_000, 'the task to run');
      const reason = new Error('no longer needed');
      stop.abort(reason);
      expect(await aborted).toBe(reason);
      expect(await timedOut).toMatchObject({ code: 'TIMEOUT' });
      release.open();
      expect(await engine.result(h.id, { timeout: '20s' })).toBe(7);
    });
  });
});
