// The task event log (engine.get().history, engine.events()) and the observer seam, on the store
// the engine suites run on (SQLite, and PostgreSQL in the engine-on-postgres project).
import { describe, expect, it } from 'vitest';
import { Engine, NonRetryableError, rebuildTask, workflow, type Observer, type StepInfo, type TaskEvent, type TaskInfo, type WorkflowContext } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, advanceUntil, eventually, gate, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

/** The stored task as the log must rebuild it. */
function expectRebuilt(info: TaskInfo): void {
  const rebuilt = rebuildTask(info.history);
  expect(rebuilt.status).toBe(info.status);
  if (info.status === 'succeeded') expect(rebuilt.output).toEqual(info.output);
  if (info.status === 'failed') expect(rebuilt.error?.message).toBe(info.error.message);
  const journal = (
    s: Pick<StepInfo, 'seq' | 'name' | 'kind' | 'status' | 'output' | 'attempts' | 'startedAt' | 'finishedAt' | 'wakeAt' | 'epoch'> & { error: { message: string } | null },
  ) => ({
    seq: s.seq,
    name: s.name,
    kind: s.kind,
    status: s.status,
    output: s.output,
    error: s.error?.message ?? null,
    attempts: s.attempts,
    startedAt: s.startedAt,
    finishedAt: s.finishedAt,
    wakeAt: s.wakeAt,
    epoch: s.epoch,
  });
  expect(rebuilt.steps.map(journal)).toEqual(info.steps.map(journal));
}

/**
 * A workflow whose step `b` fails for good until `fix()` is called; after the failure the code runs
 * `report` and fails. It returns a + 1 (2) once b succeeds.
 */
function failsUntilFixed(name: string): { wf: ReturnType<typeof workflow>; fix: () => void } {
  let failing = true;
  const wf = workflow(name, async (ctx) => {
    const a = await ctx.step('a', () => 1);
    try {
      await ctx.step('b', () => {
        if (failing) throw new NonRetryableError('b is broken');
        return 2;
      });
    } catch (e) {
      await ctx.step('report', () => 'reported');
      throw e;
    }
    return a + 1;
  });
  return { wf, fix: () => void (failing = false) };
}

function expectGapless(history: readonly TaskEvent[]): void {
  expect(history.map((e) => e.seq)).toEqual(history.map((_, i) => i + 1));
}

describe(`the task event log (${TEST_STORE})`, () => {
  it('rebuilds a task that parked, received a signal and succeeded, with every entry numbered and attributed', async () => {
    const wf = workflow('approve-flow', async (ctx, input: { n: number }) => {
      const a = await ctx.step('draft', () => ({ text: `draft ${input.n}` }));
      await ctx.sleep('cool-down', 30);
      const decision = await ctx.waitForEvent<{ ok: boolean }>('decision', { timeout: '1h' });
      const b = await ctx.step('publish', () => ({ published: !decision.timedOut && decision.payload.ok, text: a.text }));
      return b;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { parkAfterMs: 5 });
    const { id } = await engine.start(wf, { n: 1 }, { by: 'bob' });
    await waitForStatus(engine, id, 'waiting');
    await eventually(async () => (await engine.get(id)).wait?.kind === 'event', 10_000, 'the task to wait for the decision');
    await engine.signal(id, 'decision', { ok: true }, { by: { kind: 'system', id: 'review-bot' } });
    expect(await engine.result(id, { timeout: '10s' })).toEqual({ published: true, text: 'draft 1' });

    const info = await engine.get(id);
    expectGapless(info.history);
    expectRebuilt(info);
    const first = info.history[0];
    expect(first).toMatchObject({ type: 'transition', event: 'create', from: null, to: 'pending', actor: { kind: 'user', id: 'bob' } });
    const received = info.history.find((e) => e.type === 'signal:received');
    expect(received).toMatchObject({ name: 'decision', payload: { ok: true }, actor: { kind: 'system', id: 'review-bot' } });
    const consumed = info.history.find((e) => e.type === 'signal:consumed');
    expect(consumed).toMatchObject({ position: info.steps.find((s) => s.name === 'decision')?.seq });
    const claim = info.history.find((e) => e.type === 'transition' && e.event === 'claim');
    expect(claim?.actor.kind).toBe('worker');
    const completed = info.history.filter((e) => e.type === 'step:completed').map((e) => (e.type === 'step:completed' ? e.step.name : ''));
    expect(completed).toEqual(expect.arrayContaining(['draft', 'cool-down', 'decision', 'publish']));
    const last = info.history[info.history.length - 1];
    expect(last).toMatchObject({ type: 'transition', event: 'complete', to: 'succeeded', output: { published: true, text: 'draft 1' } });
  });

  it('rebuilds a task that failed, was retried from its failed step by a named user, and succeeded', async () => {
    const { wf, fix } = failsUntilFixed('flaky-once');
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    const failed = await engine.get(id);
    expectRebuilt(failed);
    expect(failed.history[failed.history.length - 1]).toMatchObject({ type: 'transition', event: 'fail', error: { message: expect.stringContaining('b is broken') } });

    fix();
    await engine.retry(id, { by: 'carol' });
    expect(await engine.result(id, { timeout: '10s' })).toBe(2);
    const info = await engine.get(id);
    expectGapless(info.history);
    expectRebuilt(info);
    const retry = info.history.find((e) => e.type === 'transition' && e.event === 'retry');
    expect(retry?.actor).toEqual({ kind: 'user', id: 'carol' });
    const forgotten = info.history.find((e) => e.type === 'step:forgotten');
    expect(forgotten && forgotten.type === 'step:forgotten' && forgotten.seqs.length).toBe(1);
    expect(info.steps.map((s) => s.name)).toEqual(['a', 'b']);
  });

  it('rebuilds a parked task cancelled by a user, and a running one that went through cancelling', async () => {
    const started = gate();
    const sleeper = workflow('sleeper', async (ctx) => {
      await ctx.step('first', () => 'x');
      await ctx.sleep('nap', '1h');
    });
    const busy = workflow('busy', async (ctx) => {
      await ctx.step('long', ({ signal }) => {
        started.open();
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
      });
    });
    const engine = makeEngine({ workflows: [sleeper, busy] });
    await startWorker(engine);
    const parked = await engine.start(sleeper, undefined);
    await waitForStatus(engine, parked.id, 'waiting');
    await engine.cancel(parked.id, { reason: 'not needed', by: 'dave' });
    const a = await engine.get(parked.id);
    expectGapless(a.history);
    expectRebuilt(a);
    expect(a.history[a.history.length - 1]).toMatchObject({ event: 'cancel', to: 'cancelled', actor: { id: 'dave' }, detail: { reason: 'not needed' } });

    const running = await engine.start(busy, undefined);
    await started.promise;
    await engine.cancel(running.id, { by: 'erin' });
    await waitForStatus(engine, running.id, 'cancelled');
    const b = await engine.get(running.id);
    expectGapless(b.history);
    expectRebuilt(b);
    const moves = b.history.filter((e) => e.type === 'transition').map((e) => (e.type === 'transition' ? `${e.event}:${e.to}:${e.actor.kind}` : ''));
    expect(moves).toEqual(['create:pending:user', 'claim:running:worker', 'cancel:cancelling:user', 'abort:cancelled:worker']);
  });

  it('retries a task again and again although its errors cut an emoji in half (the log still reads back)', async () => {
    let attempts = 0;
    const wf = workflow('half-emoji', async (ctx) =>
      ctx.step('s', () => {
        attempts++;
        if (attempts < 3) throw new NonRetryableError(`bad ${'🚀'.slice(0, 1)} cut`);
        return 'ok';
      }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await waitForStatus(engine, id, 'failed');
    await engine.retry(id);
    await waitForStatus(engine, id, 'failed');
    await engine.retry(id);
    expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
    const info = await engine.get(id);
    expectGapless(info.history);
    expectRebuilt(info);
  });

  it('refuses a malformed actor with a typed error and leaves the task alone', async () => {
    const wf = workflow('noop', async () => 1);
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf, undefined);
    await expect(engine.cancel(id, { by: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.pause(id, { by: { kind: 'robot', id: 'x' } as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const info = await engine.get(id);
    expect(info.status).toBe('pending');
    expect(info.history).toHaveLength(1);
  });
});

describe(`engine.events() (${TEST_STORE})`, () => {
  it("streams one task's entries live to a reader in another engine, resumes after a seq, and ends when the task succeeds", async () => {
    const release = gate();
    const wf = workflow('three', async (ctx) => {
      await ctx.step('one', () => 1);
      await ctx.step('two', () => release.promise.then(() => 2));
      await ctx.step('three', () => 3);
      return 'done';
    });
    const url = tempDbUrl();
    const writer = new Engine({ store: url, workflows: [wf] });
    const reader = new Engine({ store: url });
    try {
      await startWorker(writer);
      const { id } = await writer.start(wf, undefined);
      const seen: TaskEvent[] = [];
      const reading = (async () => {
        for await (const e of reader.events({ taskId: id, pollMs: 50 })) seen.push(e);
      })();
      await eventually(() => seen.some((e) => e.type === 'step:completed' && e.step.name === 'one'), 10_000, 'the reader to see step one');
      expect(seen.some((e) => e.type === 'transition' && e.to === 'succeeded')).toBe(false);
      release.open();
      await reading; // ends by itself once the task has succeeded
      const info = await writer.get(id);
      expect(seen.map((e) => e.seq)).toEqual(info.history.map((e) => e.seq));
      expect(seen[seen.length - 1]).toMatchObject({ type: 'transition', to: 'succeeded' });

      const resumed: TaskEvent[] = [];
      for await (const e of reader.events({ taskId: id, after: 3, follow: false })) resumed.push(e);
      expect(resumed.map((e) => e.seq)).toEqual(info.history.slice(3).map((e) => e.seq));
      await expect(reader.events({ taskId: 'nope' })[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
      expect(() => reader.events({ taskId: id, after: -1 })).toThrow(/after/);
    } finally {
      await writer.close();
      await reader.close();
    }
  });

  it("streams every task's entries, step results included, once each and in each task's order; a reader resumes from any cursor", async () => {
    const wf = workflow('pair', async (ctx, n: number) => {
      await ctx.step('a', () => n);
      return ctx.step('b', () => n * 2);
    });
    const { wf: flaky, fix } = failsUntilFixed('flaky-then-fixed');
    const engine = makeEngine({ workflows: [wf, flaky] });
    await startWorker(engine, { concurrency: 8 });
    const ids = await Promise.all(Array.from({ length: 12 }, (_, i) => engine.start(wf, i).then((r) => r.id)));
    await Promise.all(ids.map((id) => engine.result(id, { timeout: '20s' })));
    // A retry moves the results of the rows it forgets or runs again out of those rows: the
    // cross-task stream gives them once, with the failure they came before.
    const retried = (await engine.start(flaky)).id;
    await waitForStatus(engine, retried, 'failed');
    fix();
    await engine.retry(retried);
    await engine.result(retried, { timeout: '20s' });
    ids.push(retried);
    const mine = new Set(ids);
    const histories = new Map((await Promise.all(ids.map((id) => engine.get(id)))).map((t) => [t.id, t.history.map((e) => e.seq)]));
    const expected = [...histories].reduce((n, [, seqs]) => n + seqs.length, 0);

    /** Reads the stream from `after` until `count` entries of these tasks were seen (PostgreSQL shows an entry once older transactions end). */
    const read = async (after: string | undefined, count: number): Promise<Array<TaskEvent & { cursor?: string }>> => {
      const got: Array<TaskEvent & { cursor?: string }> = [];
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(), 20_000);
      for await (const e of engine.events({ ...(after === undefined ? {} : { after }), pollMs: 20, signal: stop.signal })) {
        if (!mine.has(e.taskId)) continue;
        got.push(e);
        if (got.length >= count) break;
      }
      clearTimeout(timer);
      return got;
    };
    const all = await read(undefined, expected);
    const keys = all.map((e) => `${e.taskId}#${e.seq}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const [id, seqs] of histories) expect(all.filter((e) => e.taskId === id).map((e) => e.seq)).toEqual(seqs);
    expect(all.filter((e) => e.type === 'step:completed').length).toBe(12 * 2 + 3); // the retried task's a, report, then b
    expect(all.filter((e) => e.type === 'step:failed').length).toBe(1);

    // From any entry's cursor (one among step results delivered with an entry, too), the stream
    // goes on with the entry right after it.
    const amongResults = all.findIndex((e) => e.cursor?.includes('|'));
    expect(amongResults).toBeGreaterThanOrEqual(0);
    for (const at of [amongResults, Math.floor(all.length / 2), all.length - 3]) {
      const cursor = all[at]?.cursor as string;
      const rest = await read(cursor, 2);
      expect(rest.map((e) => `${e.taskId}#${e.seq}`)).toEqual(keys.slice(at + 1, at + 3));
    }
    for (const after of ['x|0', 'now|3', '12|x']) {
      await expect(async () => {
        for await (const e of engine.events({ after, follow: false })) void e;
      }).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});

describe(`observers (${TEST_STORE})`, () => {
  it('see each run and step attempt with its context, and every log entry once in order; a throwing observer fails nothing', async () => {
    let calls = 0;
    const wf = workflow('observed', async (ctx) => {
      await ctx.step(
        'fetch',
        () => {
          calls++;
          if (calls === 1) throw new Error('transient');
          return 'ok';
        },
        { retry: { maxAttempts: 3, initialDelay: 1 } },
      );
      return ctx.step('save', () => 'saved');
    });
    const hooks: string[] = [];
    const entries: TaskEvent[] = [];
    const recorder: Observer = {
      name: 'recorder',
      onRunStart: (r) => void hooks.push(`run:start:${r.workflow}:e${r.epoch}`),
      onRunEnd: (r) => void hooks.push(`run:end:${r.status}`),
      onStepStart: (a) => void hooks.push(`step:start:${a.step}:${a.attempt}:${a.idempotencyKey === `v1:${a.taskId}:${a.step}#1`}`),
      onStepEnd: (a) => void hooks.push(`step:end:${a.step}:${a.attempt}`),
      onStepError: (a) => void hooks.push(`step:error:${a.step}:${a.attempt}:${a.retrying}:${a.error.message}`),
      onEvent: (e) => void entries.push(e),
    };
    const thrower: Observer = {
      name: 'thrower',
      onStepEnd: () => {
        throw new Error('observer bug');
      },
      onEvent: () => Promise.reject(new Error('async observer bug')),
    };
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }): void => void (w.code === 'STEPWISE_OBSERVER' && warnings.push(w.message));
    process.on('warning', onWarning);
    try {
      const engine = makeEngine({ workflows: [wf], observers: [thrower, recorder] });
      await startWorker(engine);
      const { id } = await engine.start(wf, undefined);
      // Generous bounds: the machine may be busy; the test is about what is seen, not how fast.
      expect(await engine.result(id, { timeout: '25s' })).toBe('saved');
      const info = await engine.get(id);
      await eventually(() => entries.length >= info.history.length, 20_000, 'onEvent to see every entry');
      expect(entries.slice(0, info.history.length).map((e) => e.seq)).toEqual(info.history.map((e) => e.seq));
      await eventually(() => hooks.includes('run:end:succeeded'), 20_000, 'the run to end');
      expect(hooks).toEqual([
        'run:start:observed:e1',
        'step:start:fetch:1:true',
        'step:error:fetch:1:true:transient',
        'step:start:fetch:2:true',
        'step:end:fetch:2',
        'step:start:save:1:true',
        'step:end:save:1',
        'run:end:succeeded',
      ]);
      await eventually(() => warnings.length >= 2, 5000, 'warnings about the throwing observer');
      expect(warnings.some((w) => w.includes('thrower') && w.includes('observer bug'))).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('refuses an observer that is not an object', () => {
    expect(() => new Engine({ store: tempDbUrl(), observers: [null as never] })).toThrow(/observer/);
  });
});

type Gate = ReturnType<typeof gate<void>>;

/** The busy branch of the tests below: a step that opens `working` as it starts and runs until the test opens `finish`. */
function longWork(ctx: WorkflowContext, working: Gate, finish: Gate): Promise<string> {
  return ctx.step('long-work', async () => {
    working.open();
    await finish.promise;
    return 'worked';
  });
}

describe(`signals reach a wait the run is still busy beside (${TEST_STORE})`, () => {
  it('gives a signal sent before the deadline to its wait, while another branch keeps the run busy', async () => {
    // On a manual clock the deadline passes only once the signal is stored, and long-work runs
    // until the test lets it end: however slowly the signal is written, it is before the deadline,
    // and the run is busy when it comes (real timers would let a slow write lose).
    const clock = new ManualClock();
    const working = gate();
    const finish = gate();
    const wf = workflow('busy-wait', async (ctx) => {
      const [decision] = await Promise.all([ctx.waitForEvent<string>('approve', { timeout: '2s' }), longWork(ctx, working, finish)]);
      const next = await ctx.waitForEvent<string>('approve', { timeout: '200ms' });
      return { first: decision, second: next };
    });
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine, { leaseMs: 86_400_000 });
    const { id } = await engine.start(wf, undefined);
    await working.promise; // the wait is registered and the run is busy beside it
    await engine.signal(id, 'approve', 'yes');
    await clock.advance('2s'); // the deadline, while long-work still runs
    finish.open();
    // The second wait gets no signal: it times out once the clock passes its deadline.
    await advanceUntil(clock, async () => (await engine.get(id)).status === 'succeeded', 'the second wait to time out');
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ first: { timedOut: false, name: 'approve', payload: 'yes' }, second: { timedOut: true } });
  });

  it('gives the wait a signal sent before its deadline by another process whose news never arrives', async () => {
    // On a manual clock shared by both engines, the deadline passes only once the signal is stored,
    // and while the other branch still runs: however slowly the sender writes, the signal is
    // before it, and the run is busy when it comes (real timers would let a slow write lose).
    const clock = new ManualClock();
    const working = gate();
    const finish = gate();
    const wf = workflow('busy-wait-2', async (ctx) => {
      const [decision] = await Promise.all([ctx.waitForEvent<string>('approve', { timeout: '1s' }), longWork(ctx, working, finish)]);
      return decision;
    });
    const url = tempDbUrl();
    const runner = new Engine({ store: url, workflows: [wf], clock });
    const sender = new Engine({ store: url, clock });
    try {
      await startWorker(runner, { leaseMs: 86_400_000 });
      const { id } = await runner.start(wf, undefined);
      await working.promise; // the wait is registered and the run is busy beside it
      await sender.signal(id, 'approve', 'from afar');
      await clock.advance('1s'); // the deadline, in the run, while long-work still runs
      finish.open();
      expect(await runner.result(id, { timeout: '20s' })).toEqual({ timedOut: false, name: 'approve', payload: 'from afar' });
    } finally {
      await runner.close();
      await sender.close();
    }
  });
});

describe(`progress reports (${TEST_STORE})`, () => {
  it('stores what a long step reports for show, ls and get, coalesced to a few writes and no journal rows', async () => {
    const release = gate();
    let writes = 0;
    const wf = workflow('batch-of-docs', async (ctx) => {
      ctx.progress({ note: 'starting' });
      return ctx.step('summarise', async ({ progress }) => {
        for (let i = 1; i <= 200; i++) progress({ done: i, total: 200, note: 'documents' });
        await release.promise;
        return 'done';
      });
    });
    const engine = makeEngine({ workflows: [wf] });
    const store = await engine.ready();
    const original = store.setProgress.bind(store);
    store.setProgress = (...args) => {
      writes++;
      return original(...args);
    };
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    // The last report reaches the task, however many came in between.
    await eventually(async () => (await engine.get(id, { steps: false, history: false })).progress?.done === 200, 10_000, 'the last report');
    const t = await engine.get(id, { steps: false, history: false });
    expect(t.progress).toMatchObject({ done: 200, total: 200, note: 'documents', step: 'summarise', at: expect.any(Number) });
    expect(t.steps).toEqual([]);
    expect(t.history).toEqual([]);
    expect(writes).toBeLessThanOrEqual(4); // 201 reports: one write, then one a second at most
    const listed = (await engine.list()).tasks.find((x) => x.id === id);
    expect(listed?.progress?.done).toBe(200);
    release.open();
    expect(await engine.result(id)).toBe('done');
    const info = await engine.get(id);
    expect(info.steps).toHaveLength(1); // reports wrote no journal rows
  });

  it('refuses a malformed progress report with a clear error to the step', async () => {
    const wf = workflow('bad-progress', async (ctx) =>
      ctx.step('s', ({ progress }) => {
        try {
          progress({ done: -1 });
          return 'accepted';
        } catch (e) {
          return (e as Error).message;
        }
      }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    expect(await engine.result(id)).toMatch(/done must be a number ≥ 0/);
  });
});
