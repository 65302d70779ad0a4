// Starts share their writes: concurrent start() calls of one process go into one insertTasks per
// batch, startMany writes a list in one statement, and a batch announces itself once. Observed by
// counting store calls (a spy), never by timing.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Engine, IdempotencyConflictError, InvalidInputError, StoreUnavailableError, openStore, workflow, type Store } from '../src/index.ts';
import type { NewTask, WakeEvent } from '../src/store.ts';
import { TEST_STORE, eventually, startWorker, tempDbUrl } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const echo = workflow('echo', async (_ctx, input: unknown) => input);
const three = workflow('three', async (ctx, input: { n: number }) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  await ctx.step('c', () => 3);
  return input.n;
});
const typed = workflow('typed', async (_ctx, input: { n: number }) => input.n, { input: z.object({ n: z.number() }) });

interface Spied {
  store: Store;
  /** The size of each insertTasks call. */
  batches: number[];
  /** insertTask calls (one task each). */
  singles: number;
  /** The wake-up each insertTasks call was given. */
  wakes: Array<WakeEvent | undefined>;
}

async function spied(fail?: (tasks: readonly NewTask[]) => Error | undefined): Promise<Spied> {
  const inner = await openStore(tempDbUrl());
  const s: Spied = { store: inner, batches: [], singles: 0, wakes: [] };
  s.store = spyStore(inner, {
    insertTasks: (original) => async (tasks, notify) => {
      s.batches.push(tasks.length);
      s.wakes.push(notify);
      const e = fail?.(tasks);
      if (e) throw e;
      return original(tasks, notify);
    },
    insertTask: (original) => async (task) => {
      s.singles++;
      return original(task);
    },
  });
  return s;
}

async function withEngine<T>(s: Spied, fn: (engine: Engine) => Promise<T>, workflows = [echo, three, typed]): Promise<T> {
  const engine = new Engine({ store: s.store, workflows });
  try {
    return await fn(engine);
  } finally {
    await engine.close();
    await s.store.close();
  }
}

describe(`batched starts (${TEST_STORE})`, () => {
  it('500 concurrent start() calls are written as one batch and each gets its own task', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const handles = await Promise.all(Array.from({ length: 500 }, (_, i) => engine.start(three, { n: i })));
      expect(s.batches).toEqual([500]);
      expect(s.singles).toBe(0);
      expect(new Set(handles.map((h) => h.id)).size).toBe(500);
      expect(handles.every((h) => h.created && h.status === 'pending')).toBe(true);
      // One wake-up for the batch (all of one workflow), not one per task, naming the engine that
      // sent it (which ignores its echo: it told its own workers already).
      expect(s.wakes).toEqual([{ reason: 'task', taskId: '*', workflow: 'three', origin: expect.any(String) }]);
      await startWorker(engine, { concurrency: 64 });
      const outputs = await Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
      expect(outputs).toEqual(handles.map((_, i) => i));
      // Each task's log starts with its own creation.
      const info = await engine.get(handles[7]!.id);
      expect(info.history[0]).toMatchObject({ seq: 1, type: 'transition', event: 'create', to: 'pending' });
    });
  });

  it('starts made while a batch is written go into the next batch', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const inner = await openStore(tempDbUrl());
    const batches: number[] = [];
    const store = spyStore(inner, {
      insertTasks: (original) => async (tasks, notify) => {
        batches.push(tasks.length);
        if (batches.length === 1) await held;
        return original(tasks, notify);
      },
    });
    await withEngine({ store, batches, singles: 0, wakes: [] }, async (engine) => {
      const first = engine.start(echo, 0);
      await eventually(() => batches.length === 1, 10_000, 'the first batch to be written');
      const rest = Array.from({ length: 30 }, (_, i) => engine.start(echo, i + 1));
      await new Promise((r) => setImmediate(r));
      release();
      const all = await Promise.all([first, ...rest]);
      expect(batches).toEqual([1, 30]);
      expect(all.map((h) => h.created)).toEqual(all.map(() => true));
    });
  });

  it('idempotency keys are deduplicated exactly inside a batch and against earlier tasks, conflicts per call', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const before = await engine.start(echo, { a: 1 }, { idempotencyKey: 'old' });
      const calls = [
        engine.start(echo, { a: 1 }, { idempotencyKey: 'old' }), // the earlier task
        engine.start(echo, { b: 1 }, { idempotencyKey: 'new' }), // created
        engine.start(echo, { b: 1 }, { idempotencyKey: 'new' }), // the task created just before, same batch
        engine.start(echo, { b: 2 }, { idempotencyKey: 'new' }), // same key, other input: this call only fails
        engine.start(echo, { c: 1 }), // no key: created
      ];
      const settled = await Promise.allSettled(calls);
      expect(s.batches).toEqual([1, 5]);
      const value = (i: number) => (settled[i] as PromiseFulfilledResult<{ id: string; created: boolean }>).value;
      expect(value(0)).toMatchObject({ id: before.id, created: false });
      expect(value(1).created).toBe(true);
      expect(value(2)).toMatchObject({ id: value(1).id, created: false });
      expect(settled[3]).toMatchObject({ status: 'rejected', reason: expect.any(IdempotencyConflictError) });
      expect(value(4).created).toBe(true);
      expect((await engine.list()).tasks).toHaveLength(3);
    });
  });

  it('a call with bad input fails alone; the others of its tick are started in one batch', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const settled = await Promise.allSettled([engine.start(typed, { n: 1 }), engine.start('typed', { n: 'x' }), engine.start(typed, { n: 3 })]);
      expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidInputError);
      expect(s.batches).toEqual([2]);
    });
  });

  it('a batch the store refuses is tried one task at a time, so that only the refused task fails', async () => {
    const refused = new Error('this task is refused');
    // The batch of three is refused (it holds the bad task); alone, only the bad task is.
    const s = await spied((tasks) => (tasks.some((t) => t.input === '"bad"') ? refused : undefined));
    await withEngine(s, async (engine) => {
      const settled = await Promise.allSettled([engine.start(echo, 'good'), engine.start(echo, 'bad'), engine.start(echo, 'fine')]);
      expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((settled[1] as PromiseRejectedResult).reason).toBe(refused);
      expect(s.batches).toEqual([3, 1, 1, 1]);
      expect((await engine.list()).tasks.map((t) => t.workflow)).toEqual(['echo', 'echo']);
    });
  });

  it('a store that is unavailable fails every call of the batch with that error, without a retry one by one', async () => {
    const down = new StoreUnavailableError('The test store is unavailable');
    const s = await spied(() => down);
    await withEngine(s, async (engine) => {
      const settled = await Promise.allSettled([engine.start(echo, 1), engine.start(echo, 2)]);
      expect(settled.map((r) => (r as PromiseRejectedResult).reason)).toEqual([down, down]);
      expect(s.batches).toEqual([2]);
    });
  });
});

describe(`startMany (${TEST_STORE})`, () => {
  it('starts a list in one statement, returning ids and created in order', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const existing = await engine.start(echo, { doc: 3 }, { idempotencyKey: 'doc-3' });
      const items = Array.from({ length: 2000 }, (_, i) => ({ workflow: 'echo', input: { doc: i }, idempotencyKey: `doc-${i}` }));
      const handles = await engine.startMany(items);
      expect(s.batches).toEqual([1, 2000]);
      expect(handles).toHaveLength(2000);
      expect(handles[3]).toMatchObject({ id: existing.id, created: false });
      expect(handles.filter((h) => h.created)).toHaveLength(1999);
      // In order: each handle is the task of its item.
      const sample = await engine.get(handles[1234]!.id);
      expect(sample.input).toEqual({ doc: 1234 });
      // Again with the same keys: every task exists.
      const again = await engine.startMany(items);
      expect(again.map((h) => h.id)).toEqual(handles.map((h) => h.id));
      expect(again.every((h) => !h.created)).toBe(true);
      const worker = await startWorker(engine, { concurrency: 64 });
      expect(await handles[1999]!.result({ timeout: '60s' })).toEqual({ doc: 1999 });
      await worker.stop();
    });
  });

  it('checks every item before writing: a bad one rejects the call naming its index, nothing is started', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      await expect(
        engine.startMany([
          { workflow: typed, input: { n: 1 } },
          { workflow: 'typed', input: { n: 'two' } },
        ]),
      ).rejects.toThrow(/item 1: .*typed/);
      await expect(engine.startMany([{ workflow: 'nope', input: 1 }])).rejects.toMatchObject({ code: 'WORKFLOW_NOT_FOUND' });
      await expect(engine.startMany([{ workflow: echo, idempotencyKey: '' }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(engine.startMany('x' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(s.batches).toEqual([]);
      expect((await engine.list()).tasks).toHaveLength(0);
      expect(await engine.startMany([])).toEqual([]);
    });
  });

  it('a key repeated in one list with the same input is one task; with another input, a conflict', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const [a, b] = await engine.startMany([
        { workflow: echo, input: 1, idempotencyKey: 'k' },
        { workflow: echo, input: 1, idempotencyKey: 'k' },
      ]);
      expect(a!.created).toBe(true);
      expect(b).toMatchObject({ id: a!.id, created: false });
      await expect(
        engine.startMany([
          { workflow: echo, input: 5, idempotencyKey: 'j' },
          { workflow: echo, input: 6, idempotencyKey: 'j' },
        ]),
      ).rejects.toThrow(IdempotencyConflictError);
    });
  });

  it('tasks of several workflows in one list get one wake-up for any workflow, and all run', async () => {
    const s = await spied();
    await withEngine(s, async (engine) => {
      const handles = await engine.startMany([
        { workflow: echo, input: 'e' },
        { workflow: three, input: { n: 9 } },
      ]);
      expect(s.wakes).toEqual([{ reason: 'task', taskId: '*', origin: expect.any(String) }]);
      await startWorker(engine);
      expect(await Promise.all(handles.map((h) => h.result({ timeout: '30s' })))).toEqual(['e', 9]);
    });
  });
});
