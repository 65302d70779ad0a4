// The crash simulation behind checkResume: a worker whose store (ProcessStore) dies at a chosen
// write, abandoned on the spot (Worker.abandon). These tests watch the real store underneath and
// the workflow's own step functions, to show that a dead worker behaves as a killed process: no
// call of it reaches the database after its crash point, no step function starts after it, no
// result reaches its code, it leaves its lease behind and no timer of its own keeps running.
import { createHook } from 'node:async_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine, workflow, type Worker, type Workflow } from '../src/index.ts';
import type { Store } from '../src/store.ts';
import { openStore } from '../src/store-url.ts';
import { ManualClock } from '../src/testing/index.ts';
import { ProcessStore, type CrashPlan, type WriteInfo } from '../src/replay/process-store.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const settle = async (ms: number): Promise<void> => {
  const until = Date.now() + ms;
  while (Date.now() < until) await new Promise((r) => setTimeout(r, 5));
};

/** Polls `check` (real time, generous: only a broken simulation waits it out). */
async function eventually(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A step function's body: notes that it ran, returns `value`. */
function ran<T>(started: string[], name: string, value: T): T {
  started.push(name);
  return value;
}

/**
 * Watches the timers created from now on by anything but this file's own helpers: `live()` lists
 * those not yet fired or cleared, with where they were made.
 */
function watchTimers(): { live: () => string[]; stop: () => void } {
  const live = new Map<number, string>();
  const hook = createHook({
    init(id, type) {
      if (type !== 'Timeout') return;
      const stack = new Error('timer made here').stack ?? '';
      const frames = stack.split('\n');
      const caller = frames[frames.findIndex((f) => f.includes('(node:timers:')) + 1] ?? '';
      if (!caller.includes('testing.crash.test.ts')) live.set(id, stack);
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return { live: () => [...live.values()], stop: () => hook.disable() };
}

interface Setup {
  url: string;
  /** Every method called on the real store under the dying worker, in order. */
  reached: string[];
  /** How many calls had reached it when the worker died. */
  reachedAtDeath: () => number;
  death: () => WriteInfo | null;
  worker: Worker;
  client: Engine;
  clientStore: Store;
  clock: ManualClock;
}

/** A worker on a store that dies at `plan`, and a client engine of its own on the same database. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function dyingWorker(wf: Workflow<any, any>, plan: CrashPlan, beforeWorker?: () => void): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-crash-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite:${join(dir, 'db.sqlite')}`;
  const clock = new ManualClock();
  const client = new Engine({ store: url, workflows: [wf], clock });
  cleanups.push(() => client.close());
  const clientStore = await client.ready();
  const real = await openStore(url);
  cleanups.push(() => real.close());
  const reached: string[] = [];
  const spied = new Proxy(real, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        reached.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  let worker: Worker | null = null;
  let atDeath = -1;
  let death: WriteInfo | null = null;
  const view = new ProcessStore(spied, plan, (w) => {
    atDeath = reached.length;
    death = w;
    worker?.abandon();
  });
  beforeWorker?.();
  const engine = new Engine({ store: view.store, workflows: [wf], clock });
  worker = engine.worker({ workerId: 'dying', pollIntervalMs: 5, parkAfterMs: 0 });
  await worker.start();
  return { url, reached, reachedAtDeath: () => atDeath, death: () => death, worker, client, clientStore, clock };
}

describe('a worker that dies at a write', () => {
  it('before the write: nothing reaches the database after it, no step starts, the lease is left behind, no timer is left running', async () => {
    const started: string[] = [];
    const wf = workflow('crash-before', async (ctx) => {
      const a = await ctx.step('a', () => ran(started, 'a', 1));
      await ctx.step('b', () => ran(started, 'b', a));
      await ctx.sleep('nap', '1h');
      return ctx.step('c', () => ran(started, 'c', 3));
    });
    // The timers of the dying worker's engine, not those of the client engine, which lives on
    // (on SQLite it watches for other processes' commits).
    let timers: ReturnType<typeof watchTimers> = { live: () => [], stop: () => undefined };
    const s = await dyingWorker(wf, { write: 2, when: 'before' }, () => {
      timers = watchTimers();
      cleanups.push(() => timers.stop());
    });
    const { id } = await s.client.start(wf, null);
    await eventually(() => s.death() !== null, 'the worker to die');
    expect(s.death()).toMatchObject({ index: 2, what: 'the result of step "b"', results: ['b'] });
    const atDeath = s.reachedAtDeath();
    const row = await s.clientStore.getTask(id);
    const log = await s.clientStore.getEvents(id);
    // Time passes, on the clock and for real: a live process would heartbeat, poll, write and run on.
    await s.clock.advance('2h');
    await settle(100);
    expect(s.reached.slice(atDeath)).toEqual([]);
    expect(started).toEqual(['a', 'b']);
    expect(s.worker.state).toBe('stopped');
    const after = await s.clientStore.getTask(id);
    expect(after).toEqual(row);
    expect(await s.clientStore.getEvents(id)).toEqual(log);
    // Step b ran, but its checkpoint never became durable; the task is still leased by the dead worker.
    expect((await s.clientStore.getSteps(id)).map((r) => [r.name, r.status])).toEqual([['a', 'completed']]);
    expect(after).toMatchObject({ status: 'running', leaseOwner: 'dying' });
    // Every timer made since the worker was created (heartbeat, poll, scanners, the run's) has ended.
    await eventually(() => timers.live().length === 0, "the dead worker's timers to end").catch((e: Error) => {
      throw new Error(`${e.message}; still live:\n${timers.live().join('\n---\n')}`);
    });
  });

  it('after the write: it is durable, its answer never comes back, and the next step never starts', async () => {
    const started: string[] = [];
    const wf = workflow('crash-after', async (ctx) => {
      await ctx.step('a', () => ran(started, 'a', 1));
      await ctx.step('b', () => ran(started, 'b', 2));
      return ctx.step('c', () => ran(started, 'c', 3));
    });
    const s = await dyingWorker(wf, { write: 1, when: 'after' });
    const { id } = await s.client.start(wf, null);
    await eventually(() => s.death() !== null, 'the worker to die');
    const atDeath = s.reachedAtDeath();
    expect(s.reached[atDeath - 1]).toMatch(/^writeBatch/); // the write itself reached the database
    await settle(100);
    expect(s.reached.slice(atDeath)).toEqual([]);
    expect(started).toEqual(['a']);
    expect((await s.clientStore.getSteps(id)).map((r) => [r.name, r.status])).toEqual([['a', 'completed']]);
  });

  it('a step still running when the worker dies: its end reaches no code, and nothing after it starts', async () => {
    const started: string[] = [];
    let finishSlow!: () => void;
    const slowDone = new Promise<void>((r) => (finishSlow = r));
    let codeAfterAll = false;
    const wf = workflow('crash-parallel', async (ctx) => {
      await ctx.step('first', () => ran(started, 'first', 0));
      const [fast] = await Promise.all([
        ctx.step('fast', () => ran(started, 'fast', 1)),
        ctx.step('slow', async () => {
          started.push('slow');
          await slowDone;
          return 2;
        }),
      ]);
      codeAfterAll = true;
      return ctx.step('last', () => ran(started, 'last', fast));
    });
    // Write 1 is "first"'s result; write 2 carries "fast"'s, while "slow" still runs.
    const s = await dyingWorker(wf, { write: 2, when: 'before' });
    const { id } = await s.client.start(wf, null);
    await eventually(() => s.death() !== null, 'the worker to die');
    expect(s.death()?.results).toEqual(['fast']);
    const atDeath = s.reachedAtDeath();
    finishSlow(); // the slow step's function returns after the crash, as a call in flight might
    await settle(100);
    expect(started).toEqual(['first', 'fast', 'slow']);
    expect(codeAfterAll).toBe(false);
    expect(s.reached.slice(atDeath)).toEqual([]);
    expect((await s.clientStore.getSteps(id)).filter((r) => r.status === 'completed').map((r) => r.name)).toEqual(['first']);
  });

  it('a call the worker made before dying may still land: settled() waits for it (whoever takes the tasks over waits too)', async () => {
    let answer!: (v: unknown) => void;
    const calls: string[] = [];
    const fake = {
      heartbeat: () => {
        calls.push('heartbeat');
        return new Promise((r) => (answer = r));
      },
      writeBatch: () => {
        calls.push('writeBatch');
        return Promise.resolve([true]);
      },
    } as unknown as Store;
    const view = new ProcessStore(fake, { write: 1, when: 'before' }, () => undefined);
    const beat = view.store.heartbeat({ workerId: 'w', now: 0, leaseMs: 1, held: [] });
    void view.store.writeBatch([]); // write 1: the process dies before it
    expect(view.dead).toBe(true);
    expect(calls).toEqual(['heartbeat']);
    let settled = false;
    const done = view.settled().then(() => (settled = true));
    await settle(20);
    expect(settled).toBe(false); // the heartbeat sent before the crash has not landed yet
    answer([]);
    await done;
    await expect(beat).resolves.toEqual([]);
    // After its death, nothing reaches the store and nothing settles.
    let answered = false;
    void view.store.heartbeat({ workerId: 'w', now: 0, leaseMs: 1, held: [] }).then(() => (answered = true));
    await settle(20);
    expect(answered).toBe(false);
    expect(calls).toEqual(['heartbeat']);
  });
});
