// Start options tied to keys and titles (issue 31 point 5, issue 28 point 4): debounced starts
// collapse into one task with the last input until a worker claims it; singleton starts refuse or
// join while a task of their key is live; titles come from the start or the workflow. Time moves
// by a ManualClock only: nothing here depends on how fast the machine is.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, NonRetryableError, SingletonRunningError, workflow, type TaskEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, gate, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';
import { Engine } from '../src/index.ts';

const echo = workflow('echo-keys', async (_ctx, input: { n: number }) => input.n);
const other = workflow('other-keys', async (_ctx, input: { n: number }) => input.n);
const titled = workflow('titled', async (_ctx, input: { topic: string }) => input.topic, { title: (input) => `Article: ${input.topic}` });

const debounced = (e: TaskEvent[]): TaskEvent[] => e.filter((x) => x.type === 'task:debounced');

describe(`debounced starts (${TEST_STORE})`, () => {
  it('starts of one workflow and key within the period are one task, due a period after the last, that runs with the last input', async () => {
    const clock = new ManualClock();
    const t0 = clock.now();
    const engine = makeEngine({ workflows: [echo, other], clock });
    const first = await engine.start(echo, { n: 1 }, { debounce: { key: 'user-7', period: '10s' } });
    expect(first).toMatchObject({ created: true, status: 'pending' });
    expect((await engine.get(first.id)).runAt).toBe(t0 + 10_000);
    await clock.advance('4s');
    const second = await engine.start(echo, { n: 2 }, { debounce: { key: 'user-7', period: '10s' } });
    await clock.advance('4s');
    const third = await engine.start(echo, { n: 3 }, { debounce: { key: 'user-7', period: '10s' } });
    expect([second.id, third.id]).toEqual([first.id, first.id]);
    expect([second.created, third.created]).toEqual([false, false]);
    // Another key, and the same key of another workflow, are tasks of their own.
    const otherKey = await engine.start(echo, { n: 9 }, { debounce: { key: 'user-8', period: '10s' } });
    const otherWorkflow = await engine.start(other, { n: 9 }, { debounce: { key: 'user-7', period: '10s' } });
    expect(new Set([first.id, otherKey.id, otherWorkflow.id]).size).toBe(3);

    const info = await engine.get(first.id);
    expect(info).toMatchObject({ input: { n: 3 }, runAt: t0 + 18_000, debounceKey: 'user-7', status: 'pending' });
    expect(debounced(info.history)).toMatchObject([
      { type: 'task:debounced', key: 'user-7', input: { n: 2 }, runAt: t0 + 14_000 },
      { type: 'task:debounced', key: 'user-7', input: { n: 3 }, runAt: t0 + 18_000 },
    ]);
    const explained = await engine.explain(first.id);
    expect(explained.summary).toMatch(/debounced task \(key "user-7"\) waiting for its period to end/);

    await startWorker(engine);
    await clock.advance('10s');
    expect(await engine.result(first.id, { timeout: '20s' })).toBe(3);
    expect((await engine.list({ workflow: 'echo-keys' })).tasks).toHaveLength(2);
  });

  it("the title follows the last start: its title option, else the workflow's title of the new input", async () => {
    const engine = makeEngine({ workflows: [titled] });
    const opts = { debounce: { key: 'k', period: '1m' } };
    const { id } = await engine.start(titled, { topic: 'one' }, opts);
    expect((await engine.get(id)).title).toBe('Article: one');
    await engine.start(titled, { topic: 'two' }, opts);
    expect((await engine.get(id)).title).toBe('Article: two');
    await engine.start(titled, { topic: 'three' }, { ...opts, title: 'Custom' });
    expect((await engine.get(id)).title).toBe('Custom');
  });

  it('maxWait bounds how far a stream of starts moves the due time', async () => {
    const clock = new ManualClock();
    const t0 = clock.now();
    const engine = makeEngine({ workflows: [echo], clock });
    const opts = { debounce: { key: 'k', period: '10s', maxWait: '15s' } };
    const { id } = await engine.start(echo, { n: 1 }, opts);
    await clock.advance('8s');
    await engine.start(echo, { n: 2 }, opts);
    expect((await engine.get(id)).runAt).toBe(t0 + 15_000);
    await clock.advance('6s');
    await engine.start(echo, { n: 3 }, opts);
    expect((await engine.get(id)).runAt).toBe(t0 + 15_000);
  });

  it('a start after a worker claimed the task starts a new task; the claimed one keeps its input', async () => {
    const clock = new ManualClock();
    const held = gate();
    const slow = workflow('slow-keys', async (ctx, input: { n: number }) => {
      await ctx.step('wait', () => held.promise);
      return input.n;
    });
    const engine = makeEngine({ workflows: [slow], clock });
    const opts = { debounce: { key: 'k', period: '1s' } };
    const a = await engine.start(slow, { n: 1 }, opts);
    await startWorker(engine);
    await clock.advance('1s');
    await waitForStatus(engine, a.id, 'running');
    const b = await engine.start(slow, { n: 2 }, opts);
    expect(b.id).not.toBe(a.id);
    expect(b.created).toBe(true);
    held.open();
    expect(await engine.result(a.id, { timeout: '20s' })).toBe(1);
    await clock.advance('1s');
    expect(await engine.result(b.id, { timeout: '20s' })).toBe(2);
  });

  it('a paused debounced task that never ran still takes the later input, and a cancelled one frees its key', async () => {
    const clock = new ManualClock();
    const engine = makeEngine({ workflows: [echo], clock });
    const opts = { debounce: { key: 'k', period: '1m' } };
    const a = await engine.start(echo, { n: 1 }, opts);
    await engine.pause(a.id);
    expect((await engine.start(echo, { n: 2 }, opts)).id).toBe(a.id);
    expect((await engine.get(a.id)).input).toEqual({ n: 2 });
    await engine.cancel(a.id);
    const b = await engine.start(echo, { n: 3 }, opts);
    expect(b).toMatchObject({ created: true });
    expect(b.id).not.toBe(a.id);
  });

  it('retry of a debounced task that never ran (failed while paused) is refused while another task of its key collects starts', async () => {
    const clock = new ManualClock();
    const forgotten = workflow('forgotten-keys', async (_ctx, input: { n: number }) => input.n, { dwell: { paused: { after: '2h', then: 'fail' } } });
    const engine = makeEngine({ workflows: [forgotten], clock });
    const worker = await startWorker(engine, { dwellScanMs: 50 });
    const opts = { debounce: { key: 'k', period: '10h' } };
    const a = await engine.start(forgotten, { n: 1 }, opts);
    await engine.pause(a.id);
    await clock.advance('2h');
    await waitForStatus(engine, a.id, 'failed', 20_000);
    // No worker claims the retried task below (it is due at once): it stays unclaimed.
    await worker.stop();
    const b = await engine.start(forgotten, { n: 2 }, opts);
    expect(b.created).toBe(true);
    await expect(engine.retry(a.id)).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT, message: expect.stringContaining(b.id) });
    await engine.cancel(b.id);
    await engine.retry(a.id);
    // Pending again and unclaimed: it collects the key's starts once more.
    expect((await engine.start(forgotten, { n: 3 }, opts)).id).toBe(a.id);
  });

  it('refuses bad debounce options with INVALID_ARGUMENT naming the option, and in startMany', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const bad = async (debounce: unknown, more: object = {}): Promise<string> => {
      const e = (await engine.start(echo, { n: 1 }, { debounce, ...more } as never).catch((x: unknown) => x)) as { code: string; message: string };
      expect(e.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
      return e.message;
    };
    expect(await bad('k')).toMatch(/debounce option must be an object/);
    expect(await bad({ key: 'k' })).toMatch(/debounce\.period is required/);
    expect(await bad({ key: '', period: '1s' })).toMatch(/debounce\.key/);
    expect(await bad({ key: 'k', period: 0 })).toMatch(/debounce\.period must be longer than 0/);
    expect(await bad({ key: 'k', period: 'soon' })).toMatch(/debounce\.period/);
    expect(await bad({ key: 'k', period: '10s', maxWait: '5s' })).toMatch(/debounce\.maxWait .* at least debounce\.period/);
    expect(await bad({ key: 'k', period: '1s', leading: true })).toMatch(/unknown option "leading"/);
    expect(await bad({ key: 'k', period: '1s' }, { idempotencyKey: 'x' })).toMatch(/debounce cannot be combined with idempotencyKey/);
    expect(await bad({ key: 'k', period: '1s' }, { delay: '1s' })).toMatch(/debounce cannot be combined with delay/);
    expect(await bad({ key: 'k', period: '1s' }, { singleton: 'k' })).toMatch(/debounce cannot be combined with singleton/);
    await expect(engine.startMany([{ workflow: echo, input: { n: 1 }, debounce: { key: 'k', period: '1s' } } as never])).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringMatching(/item 0: debounce is not supported by engine\.startMany/),
    });
    expect((await engine.list()).tasks).toHaveLength(0);
  });
});

describe(`singleton starts (${TEST_STORE})`, () => {
  it('refuses a second start while a task of the workflow and key is live, naming the key and the live task; an ended task frees the key', async () => {
    const engine = makeEngine({ workflows: [echo, other] });
    const a = await engine.start(echo, { n: 1 }, { singleton: 'user-7' });
    expect(a.created).toBe(true);
    const refused = (await engine.start(echo, { n: 2 }, { singleton: 'user-7' }).catch((e: unknown) => e)) as SingletonRunningError;
    expect(refused).toBeInstanceOf(SingletonRunningError);
    expect(refused).toMatchObject({ code: ERROR_CODES.SINGLETON_RUNNING, key: 'user-7', runningTaskId: a.id, workflow: 'echo-keys' });
    expect(refused.message).toContain(a.id);
    // Another key, and the same key of another workflow, are free.
    expect((await engine.start(echo, { n: 3 }, { singleton: 'user-8' })).created).toBe(true);
    expect((await engine.start(other, { n: 3 }, { singleton: 'user-7' })).created).toBe(true);
    expect((await engine.get(a.id)).singletonKey).toBe('user-7');
    await engine.cancel(a.id);
    const b = await engine.start(echo, { n: 4 }, { singleton: { key: 'user-7' } });
    expect(b.created).toBe(true);
    expect(b.id).not.toBe(a.id);
  });

  it("mode 'join' answers with the live task, and a key runs again once its task succeeded", async () => {
    const engine = makeEngine({ workflows: [echo] });
    const a = await engine.start(echo, { n: 1 }, { singleton: { key: 'k', mode: 'join' } });
    const joined = await engine.start(echo, { n: 2 }, { singleton: { key: 'k', mode: 'join' } });
    expect(joined).toMatchObject({ id: a.id, created: false });
    await startWorker(engine);
    expect(await joined.result({ timeout: '20s' })).toBe(1);
    const b = await engine.start(echo, { n: 3 }, { singleton: { key: 'k', mode: 'join' } });
    expect(b.created).toBe(true);
    expect(await b.result({ timeout: '20s' })).toBe(3);
  });

  it('an idempotency key that names a task answers with it before the singleton rule; a refused start leaves its key unused', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const a = await engine.start(echo, { n: 1 }, { singleton: 'k', idempotencyKey: 'order-1' });
    const again = await engine.start(echo, { n: 1 }, { singleton: 'k', idempotencyKey: 'order-1' });
    expect(again).toMatchObject({ id: a.id, created: false });
    await expect(engine.start(echo, { n: 2 }, { singleton: 'k', idempotencyKey: 'order-1' })).rejects.toMatchObject({ code: ERROR_CODES.IDEMPOTENCY_CONFLICT });
    await expect(engine.start(echo, { n: 2 }, { singleton: 'k', idempotencyKey: 'order-2' })).rejects.toMatchObject({ code: ERROR_CODES.SINGLETON_RUNNING, runningTaskId: a.id });
    await engine.cancel(a.id);
    const b = await engine.start(echo, { n: 2 }, { singleton: 'k', idempotencyKey: 'order-2' });
    expect(b.created).toBe(true);
    // The ended task still answers for its own idempotency key.
    expect(await engine.start(echo, { n: 1 }, { singleton: 'k', idempotencyKey: 'order-1' })).toMatchObject({ id: a.id, created: false, status: 'cancelled' });
  });

  it('retry of a failed singleton task is refused while another task holds its key', async () => {
    const fails = workflow('fails-keys', async (_ctx, input: { fail: boolean }) => {
      if (input.fail) throw new NonRetryableError('no');
      return 'ok';
    });
    const engine = makeEngine({ workflows: [fails] });
    const worker = await startWorker(engine);
    const a = await engine.start(fails, { fail: true }, { singleton: 's' });
    await waitForStatus(engine, a.id, 'failed');
    await worker.stop();
    const b = await engine.start(fails, { fail: false }, { singleton: 's' });
    await expect(engine.retry(a.id)).rejects.toMatchObject({ code: ERROR_CODES.SINGLETON_RUNNING, runningTaskId: b.id });
    await engine.cancel(b.id);
    await engine.retry(a.id);
    expect((await engine.get(a.id)).status).toBe('pending');
  });

  it('refuses bad singleton options with INVALID_ARGUMENT naming the option, and in startMany', async () => {
    const engine = makeEngine({ workflows: [echo] });
    for (const [singleton, pattern] of [
      ['', /singleton must be a non-empty string/],
      [42, /singleton option must be a key/],
      [{ key: 'k', mode: 'skip' }, /singleton\.mode must be 'refuse' or 'join'/],
      [{ mode: 'join' }, /singleton\.key/],
      [{ key: 'k', wait: true }, /unknown option "wait"/],
    ] as const) {
      await expect(engine.start(echo, { n: 1 }, { singleton } as never)).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringMatching(pattern) });
    }
    await expect(engine.startMany([{ workflow: echo, input: { n: 1 }, singleton: 'k' } as never])).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringMatching(/item 0: singleton is not supported by engine\.startMany/),
    });
  });
});

describe(`keyed starts from two engines on one store (${TEST_STORE})`, () => {
  it('concurrent debounced and singleton starts of two engines make one task per key', async () => {
    const url = tempDbUrl();
    const engines = [new Engine({ store: url, workflows: [echo] }), new Engine({ store: url, workflows: [echo] })];
    try {
      await engines[0]!.ready();
      const handles = await Promise.all(engines.flatMap((e, k) => Array.from({ length: 10 }, (_, i) => e.start(echo, { n: k * 10 + i }, { debounce: { key: 'd', period: '1h' } }))));
      expect(new Set(handles.map((h) => h.id)).size).toBe(1);
      expect(handles.filter((h) => h.created)).toHaveLength(1);
      const info = await engines[0]!.get(handles[0]!.id);
      expect(debounced(info.history)).toHaveLength(19);
      const singles = await Promise.all(
        engines.flatMap((e) =>
          Array.from({ length: 10 }, () =>
            e.start(echo, { n: 1 }, { singleton: 's' }).then(
              (h) => h.id,
              (err: { code: string }) => err.code,
            ),
          ),
        ),
      );
      const created = singles.filter((x) => x !== ERROR_CODES.SINGLETON_RUNNING);
      expect(created).toHaveLength(1);
      expect((await engines[1]!.list({ workflow: 'echo-keys' })).tasks).toHaveLength(2);
    } finally {
      await Promise.all(engines.map((e) => e.close()));
    }
  });
});

describe(`task titles (${TEST_STORE})`, () => {
  it("comes from the start's title option or else the workflow's title(input), and is read by get and list", async () => {
    const engine = makeEngine({ workflows: [titled, echo] });
    const a = await engine.start(titled, { topic: 'Tides' });
    const b = await engine.start(titled, { topic: 'Moons' }, { title: 'Moons, second draft' });
    const c = await engine.start(echo, { n: 1 });
    const [d] = await engine.startMany([{ workflow: echo, input: { n: 2 }, title: 'batch one' }]);
    expect((await engine.get(a.id)).title).toBe('Article: Tides');
    expect((await engine.get(b.id)).title).toBe('Moons, second draft');
    expect((await engine.get(c.id)).title).toBeNull();
    const listed = new Map((await engine.list()).tasks.map((t) => [t.id, t.title]));
    expect(listed.get(a.id)).toBe('Article: Tides');
    expect(listed.get(d!.id)).toBe('batch one');
    // Keyed starts carry titles too.
    const e = await engine.start(echo, { n: 3 }, { singleton: 'k', title: 'only one' });
    expect((await engine.get(e.id)).title).toBe('only one');
  });

  it('refuses a title that is not a string, empty or too long, at start and from title(input), and a title option that is not a function', async () => {
    const engine = makeEngine({ workflows: [echo] });
    for (const [title, pattern] of [
      [42, /title option must be a string, got number/],
      ['', /title option must be 1-200 characters/],
      ['x'.repeat(201), /title option must be 1-200 characters .* got 201/],
      ['a\u0000b', /title option contains a NUL character/],
    ] as const) {
      await expect(engine.start(echo, { n: 1 }, { title } as never)).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringMatching(pattern) });
    }
    const numeric = workflow('numeric-title', async () => 1, { title: () => 7 as unknown as string });
    await expect(engine.start(numeric)).rejects.toMatchObject({
      code: ERROR_CODES.INVALID_ARGUMENT,
      message: expect.stringMatching(/workflow\("numeric-title"\): what title\(input\) returned must be a string/),
    });
    const throwing = workflow('throwing-title', async () => 1, {
      title: () => {
        throw new Error('boom');
      },
    });
    await expect(engine.start(throwing)).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringMatching(/title\(input\) threw: boom/) });
    expect(() => workflow('bad-title', async () => 1, { title: 'x' as never })).toThrow(/title must be a function/);
    expect((await engine.list()).tasks).toHaveLength(0);
  });
});
