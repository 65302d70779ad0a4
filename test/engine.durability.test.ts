// When a result's journal row is written: before the next side effect, or with the run's last
// transition; never lost while the run holds its lease. Uses a store wrapper that makes writes slow,
// lets two of them overlap (as on a pooled database) or fail for a while.
import { describe, expect, it } from 'vitest';
import { Engine, StoreUnavailableError, openStore, workflow, type Store, type WorkerEvents } from '../src/index.ts';
import type { WriteOp } from '../src/store.ts';
import { spyStore } from './support/store-spy.ts';
import { eventually, tempDbUrl } from './support/engine.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A store whose writes go through `around` (delay them, fail them) and that allows `parallel` writes at once. */
function slowStore(inner: Store, around: (kind: string) => Promise<void>, parallel = 2): Store {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'parallelWrites') return parallel;
      if (prop === 'writeBatchNow') return undefined; // its writes are asynchronous now
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === 'writeBatch' || prop === 'transition') {
        return async (arg: unknown) => {
          const ops = (prop === 'writeBatch' ? arg : [arg]) as Array<{ kind: string }>;
          await around(ops.every((o) => o.kind === 'step') ? 'step' : 'transition');
          return (value as (a: unknown) => unknown).call(target, arg);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('durability of results', () => {
  it("writes a lone run's checkpoints at once, and retries one that fails through the queue without running its step again", async () => {
    let charged = 0;
    const wf = workflow('direct', async (ctx) => {
      await ctx.step('prepare', () => 'p');
      await ctx.step('charge', () => ++charged);
      await ctx.step('after', () => 'a');
      return 'ok';
    });
    const inner = await openStore(tempDbUrl());
    const writes: string[] = [];
    let refusedOnce = false;
    /** The checkpoint of "charge" meets a locked database once (as SQLITE_BUSY would). */
    const failOnce = (ops: readonly WriteOp[]): void => {
      if (!refusedOnce && ops.some((o) => o.kind === 'step' && o.step.name === 'charge')) {
        refusedOnce = true;
        throw new StoreUnavailableError('The database is unavailable (SQLITE_BUSY): database is locked');
      }
    };
    const store = spyStore(inner, {
      writeBatchNow: (original) => (ops) => {
        writes.push('now');
        failOnce(ops);
        return original(ops);
      },
      writeBatch: (original) => async (ops) => {
        writes.push(`batch:${ops.length}`);
        failOnce(ops);
        return original(ops);
      },
    });
    const engine = new Engine({ store, workflows: [wf] });
    const retried: string[] = [];
    try {
      const worker = engine.worker({ pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000 });
      worker.on('worker:error', (e) => retried.push(e.during));
      await worker.start();
      const { id } = await engine.start(wf);
      expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
      expect(refusedOnce).toBe(true);
      expect(charged).toBe(1);
      expect(retried.some((d) => d.startsWith('writing checkpoints'))).toBe(true);
      // One op per write: nothing waited for company (SQLite writes synchronously).
      expect(writes.length).toBeGreaterThanOrEqual(3);
      expect(writes.every((w) => w === 'now' || w === 'batch:1')).toBe(true);
      if (inner.dialect === 'sqlite') expect(writes.filter((w) => w === 'now').length).toBeGreaterThanOrEqual(2);
      expect((await engine.get(id)).steps.map((s) => `${s.name}:${s.status}`)).toEqual(['prepare:completed', 'charge:completed', 'after:completed']);
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('result() waits out a store that is unavailable for a moment, and still gives up at its timeout', async () => {
    const wf = workflow('blip', async (ctx) => ctx.step('only', async () => (await sleep(60), 'done')));
    const inner = await openStore(tempDbUrl());
    let down = false;
    let blip = true; // down for three reads only
    let refused = 0;
    const refuse = (): void => {
      // Back after three refused reads, however long those take on a busy machine.
      if (++refused >= 3 && blip) down = false;
      throw new StoreUnavailableError('The database is unavailable: terminating connection due to administrator command');
    };
    const store = spyStore(inner, {
      getTask: (original) => async (id) => {
        if (down) refuse();
        return original(id);
      },
      getTasks: (original) => async (ids) => {
        if (down) refuse();
        return original(ids);
      },
    });
    // The task runs in one engine; another (no worker of its own, so nothing hands it the
    // outcome) waits for it, and must read it.
    const engine = new Engine({ store, workflows: [wf] });
    const reader = new Engine({ store, workflows: [wf] });
    try {
      await engine.worker({ pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000 }).start();
      const { id } = await engine.start(wf);
      expect(await engine.result(id, { timeout: '30s' })).toBe('done');
      down = true;
      expect(await reader.result(id, { timeout: '30s' })).toBe('done');
      expect(refused).toBeGreaterThanOrEqual(3);
      blip = false;
      down = true;
      await expect(reader.result(id, { timeout: '100ms' })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    } finally {
      await reader.close();
      await engine.close();
      await store.close();
    }
  });

  it('keeps the row of a result that completes while an earlier row is being written, and runs its step once', async () => {
    let charged = 0;
    const wf = workflow('pair', async (ctx) => {
      await Promise.all([ctx.step('a', async () => (await sleep(20), 'a')), ctx.step('charge', async () => (await sleep(25), ++charged))]);
      return 'ok';
    });
    // Step writes are slow and two may overlap: the last transition can overtake a step write.
    const store = slowStore(await openStore(tempDbUrl()), (kind) => sleep(kind === 'step' ? 40 : 0));
    const engine = new Engine({ store, workflows: [wf] });
    try {
      await engine.worker({ pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000 }).start();
      const { id } = await engine.start(wf);
      expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
      // A step write still on its way lands in its own time (polled, not a fixed wait a busy
      // machine can outlast); a lost row never does.
      const rows = async (): Promise<string[]> => (await engine.get(id)).steps.map((s) => `${s.name}:${s.status}`).sort();
      await eventually(async () => (await rows()).join() === 'a:completed,charge:completed', 10_000, 'both step rows, completed');
      expect(await rows()).toEqual(['a:completed', 'charge:completed']);
      expect(charged).toBe(1);
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('retries the last transition while the lease is safe, so results that travel with it do not run again', async () => {
    let charged = 0;
    let down = false;
    const wf = workflow('outage-at-end', async (ctx) => {
      await ctx.step('prepare', () => 'p');
      await ctx.step('charge', () => {
        charged++;
        down = true; // the database goes away right after the side effect
        setTimeout(() => (down = false), 4000);
        return 'charged';
      });
      return 'ok';
    });
    const store = slowStore(
      await openStore(tempDbUrl()),
      async () => {
        if (down) {
          await sleep(5);
          throw new Error('injected: database unreachable');
        }
      },
      1,
    );
    const engine = new Engine({ store, workflows: [wf] });
    try {
      await engine.worker({ pollIntervalMs: 20, heartbeatMs: 100, leaseMs: 8000 }).start();
      const { id } = await engine.start(wf);
      expect(await engine.result(id, { timeout: '30s' })).toBe('ok');
      expect(charged).toBe(1);
      expect((await engine.get(id)).steps.map((s) => s.name)).toEqual(['prepare', 'charge']);
    } finally {
      await engine.close();
      await store.close();
    }
  }, 40_000);

  it('reports a step completed only once its result is durable', async () => {
    const events: string[] = [];
    const wf = workflow('report', async (ctx) => {
      await ctx.step('one', () => 1);
      return ctx.step('two', () => 2);
    });
    const engine = new Engine({ store: tempDbUrl(), workflows: [wf] });
    try {
      const worker = engine.worker({ pollIntervalMs: 20 });
      const seen = (name: keyof WorkerEvents) => (e: { step?: string; taskId: string }) => void events.push(`${name}:${e.step ?? ''}`);
      worker.on('step:completed', seen('step:completed'));
      worker.on('run:finished', seen('run:finished'));
      await worker.start();
      const { id } = await engine.start(wf);
      await engine.result(id);
      // The run's end is reported once the worker is done with it, after the result is out.
      await eventually(() => events.includes('run:finished:'), 10_000, 'the run to be reported finished');
      // `two` is written with the task's completion, so it is reported after one's (flushed before two ran).
      expect(events).toEqual(['step:completed:one', 'step:completed:two', 'run:finished:']);
    } finally {
      await engine.close();
    }
  });
});
