// Parked runs kept in memory (worker options keepParked, keepParkedMs): a task claimed again by the
// worker it parked on takes up its code where it stopped, without a replay; anything that came
// between (another worker's run, a cancel) makes the next run replay its journal as before. Each
// workflow counts how often its function starts: a replay starts it again, a resumed run does not.
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow, type Store, type WorkflowContext } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import type { HeartbeatRequest } from '../src/store/leases.ts';
import type { WriteOp } from '../src/store/journal.ts';
import { CHAT_MESSAGE_SIGNAL, chatMessages, replyStep, type ChatMessage } from '../src/ai/index.ts';
import { TEST_STORE, eventually, gate, makeEngine, startWorker, tempDbUrl, transitionsOf, waitForStatus } from './support/engine.ts';

const starts = new Map<string, number>();
const started = (id: string): number => starts.get(id) ?? 0;

/** Answers with the turn's number as the code counts it: a stale run would count wrong. */
const chat = workflow('kept-chat', async (ctx) => {
  starts.set(ctx.taskId, started(ctx.taskId) + 1);
  const transcript: ChatMessage[] = [];
  for await (const m of chatMessages(ctx, { idle: '10m' })) {
    transcript.push(m);
    const text = await ctx.step(replyStep(m.id), () => `${m.text} (turn ${transcript.length})`);
    transcript.push({ id: `${m.id}:reply`, role: 'assistant', text });
    if (m.text === 'bye') break;
  }
  return transcript.filter((t) => t.role === 'assistant').map((t) => t.text);
});

const blocker = workflow('kept-blocker', async (ctx, _input: { n: number }) => ctx.step('hold', () => held.promise));
let held = gate<string>();

async function say(engine: ReturnType<typeof makeEngine>, id: string, n: number, text: string): Promise<string> {
  await waitForStatus(engine, id, 'waiting');
  await engine.signal(id, CHAT_MESSAGE_SIGNAL, { id: `m${n}`, text });
  let reply: string | undefined;
  await eventually(
    async () => {
      const step = (await engine.get(id)).steps.find((s) => s.name === replyStep(`m${n}`) && s.status === 'completed');
      reply = step?.output as string | undefined;
      return reply !== undefined;
    },
    10_000,
    `the reply to message ${n}`,
  );
  return reply as string;
}

describe('parked runs kept in memory', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('a chat woken on the worker it parked on goes on without a replay: its function starts once over 12 turns', async () => {
    const engine = makeEngine({ workflows: [chat] });
    await startWorker(engine, { parkAfterMs: 0 });
    const { id } = await engine.start(chat, {});
    for (let n = 1; n <= 12; n++) expect(await say(engine, id, n, `hello ${n}`)).toBe(`hello ${n} (turn ${2 * n - 1})`);
    await say(engine, id, 13, 'bye');
    expect(await engine.result(id, { timeout: '10s' })).toHaveLength(13);
    expect(started(id)).toBe(1);
    // Each turn's rows belong to the run that wrote them: the epoch of the claim after its park.
    const info = await engine.get(id);
    const events = info.steps.filter((s) => s.kind === 'event');
    expect(events).toHaveLength(13);
    for (let i = 1; i < events.length; i++) expect((events[i] as { epoch: number }).epoch).toBeGreaterThan((events[i - 1] as { epoch: number }).epoch);
    expect(transitionsOf(info).filter((t) => t.event === 'claim')).toHaveLength(14);
  });

  it('with keepParked: 0 every wake-up replays (the function starts once per turn)', async () => {
    const engine = makeEngine({ workflows: [chat] });
    await startWorker(engine, { parkAfterMs: 0, keepParked: 0 });
    const { id } = await engine.start(chat, {});
    for (let n = 1; n <= 3; n++) expect(await say(engine, id, n, `hi ${n}`)).toBe(`hi ${n} (turn ${2 * n - 1})`);
    expect(started(id)).toBe(4);
  });

  it('a run kept by one worker is not resumed once another worker ran the task: the next run replays and counts right', async () => {
    const engine = makeEngine({ workflows: [chat, blocker] });
    held = gate<string>();
    const a = await startWorker(engine, { parkAfterMs: 0, concurrency: 1 });
    const { id } = await engine.start(chat, {});
    expect(await say(engine, id, 1, 'one')).toBe('one (turn 1)');
    // Worker a keeps the parked run; its only slot is then taken, so worker b runs the next turn.
    const block = await engine.start(blocker, { n: 1 });
    await waitForStatus(engine, block.id, 'running');
    const b = await startWorker(engine, { parkAfterMs: 0 });
    expect(await say(engine, id, 2, 'two')).toBe('two (turn 3)');
    expect(started(id)).toBe(2);
    await b.stop();
    held.open('done');
    await waitForStatus(engine, block.id, 'succeeded');
    // Back on worker a, whose kept run stopped at turn 1: it must not go on from there.
    expect(await say(engine, id, 3, 'three')).toBe('three (turn 5)');
    expect(started(id)).toBe(3);
    expect(a.state).toBe('running');
  });

  it('a long sleep that parked goes on in memory at its wake time', async () => {
    const sleeper = workflow('kept-sleeper', async (ctx) => {
      starts.set(ctx.taskId, started(ctx.taskId) + 1);
      const a = await ctx.step('a', () => 1);
      await ctx.sleep('sleep', '300ms');
      return a + (await ctx.step('b', () => 2));
    });
    const engine = makeEngine({ workflows: [sleeper] });
    await startWorker(engine, { parkAfterMs: 0 });
    const { id } = await engine.start(sleeper, {});
    expect(await engine.result(id, { timeout: '10s' })).toBe(3);
    expect(started(id)).toBe(1);
    expect(transitionsOf(await engine.get(id)).map((t) => t.event)).toEqual(['create', 'claim', 'park', 'claim', 'complete']);
  });

  it("a step's retry parked and resumed in memory reports its next attempt under the new claim's epoch", async () => {
    let calls = 0;
    const flaky = workflow('kept-flaky', async (ctx) => {
      starts.set(ctx.taskId, started(ctx.taskId) + 1);
      return ctx.step(
        'call',
        () => {
          if (++calls === 1) throw new Error('try again');
          return 'ok';
        },
        { retry: { maxAttempts: 3, initialDelay: 300, maxDelay: 300, jitter: false } },
      );
    });
    const attempts: Array<{ attempt: number; epoch: number }> = [];
    const engine = makeEngine({ workflows: [flaky], observers: [{ onStepStart: (a) => void attempts.push({ attempt: a.attempt, epoch: a.epoch }) }] });
    await startWorker(engine, { parkAfterMs: 0 });
    const { id } = await engine.start(flaky, {});
    expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
    expect(started(id)).toBe(1);
    expect(transitionsOf(await engine.get(id)).map((t) => t.event)).toEqual(['create', 'claim', 'park', 'claim', 'complete']);
    expect(attempts).toEqual([
      { attempt: 1, epoch: 1 },
      { attempt: 2, epoch: 2 },
    ]);
  });

  it('a parked task cancelled with cleanup owed is not resumed: the cancel replays it and its compensation runs', async () => {
    const undone: string[] = [];
    const booking = workflow('kept-booking', async (ctx) => {
      starts.set(ctx.taskId, started(ctx.taskId) + 1);
      await ctx.step('book', () => 'room', { compensate: (room) => void undone.push(room) });
      await ctx.waitForEvent('confirm', { timeout: '10m' });
      return 'confirmed';
    });
    const engine = makeEngine({ workflows: [booking] });
    await startWorker(engine, { parkAfterMs: 0 });
    const { id } = await engine.start(booking, {});
    await waitForStatus(engine, id, 'waiting');
    await engine.cancel(id, { reason: 'changed my mind' });
    await waitForStatus(engine, id, 'cancelled');
    expect(undone).toEqual(['room']);
    expect(started(id)).toBe(2);
  });
  it('a heartbeat in flight across a park and the resume answers for the old epoch only: the resumed run keeps its lease', async () => {
    const renewalHeld = gate();
    const renewalGoes = gate();
    const nextRenewal = gate();
    const twoWaits = workflow('kept-two-waits', async (ctx) => {
      starts.set(ctx.taskId, started(ctx.taskId) + 1);
      await ctx.step('a', () => renewalHeld.promise); // a renewal of epoch 1 is in flight
      await ctx.waitForEvent('first', { timeout: '10m' });
      // Resumed at epoch 2: the renewal of epoch 1 now runs, and finds that lease gone.
      await ctx.step('b', async () => {
        renewalGoes.open();
        await nextRenewal.promise; // the heartbeat has dealt with that answer
      });
      return 'done';
    });
    const inner = await openStore(tempDbUrl());
    let heldOne = false;
    let released = false;
    // The first renewal of the task's epoch 1 waits (before it reaches the store) until step b runs.
    const store = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'heartbeat') {
          return async (r: HeartbeatRequest) => {
            if (!heldOne && r.held.some((h) => h.epoch === 1)) {
              heldOne = true;
              renewalHeld.open();
              await renewalGoes.promise;
              released = true;
            } else if (released) nextRenewal.open();
            return inner.heartbeat(r);
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Store;
    try {
      const engine = makeEngine({ store, workflows: [twoWaits] });
      const worker = await startWorker(engine, { parkAfterMs: 0, heartbeatMs: 20, leaseMs: 60_000 });
      const lost: number[] = [];
      worker.on('lease:lost', ({ epoch }) => lost.push(epoch));
      const { id } = await engine.start(twoWaits, {});
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'first', {});
      expect(await engine.result(id, { timeout: '20s' })).toBe('done');
      expect(lost).toEqual([]);
      expect(started(id)).toBe(1);
      expect(transitionsOf(await engine.get(id)).map((t) => t.event)).toEqual(['create', 'claim', 'park', 'claim', 'complete']);
      await engine.close();
    } finally {
      await inner.close();
    }
  });

  it('a renewal answered after the park committed, before the worker let go of the run, does not cost the kept run', async () => {
    const waiter = workflow('kept-waiter', async (ctx) => {
      starts.set(ctx.taskId, started(ctx.taskId) + 1);
      await ctx.waitForEvent('go', { timeout: '10m' });
      return 'done';
    });
    const inner = await openStore(tempDbUrl());
    const parkCommitted = gate();
    const answered = gate();
    let parks = 0;
    let renewalsAfterPark = 0;
    // The park's write returns only once a renewal sent after it committed has been answered (the
    // store no longer counts the task as held) and the heartbeat has dealt with that answer.
    const store = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'writeBatchNow') return undefined;
        if (prop === 'writeBatch') {
          return async (ops: readonly WriteOp[]) => {
            const r = await inner.writeBatch(ops);
            if (ops.some((op) => op.kind === 'transition' && op.event === 'park') && ++parks === 1) {
              parkCommitted.open();
              await answered.promise;
            }
            return r;
          };
        }
        if (prop === 'heartbeat') {
          return async (r: HeartbeatRequest) => {
            const answer = await inner.heartbeat(r);
            if (parks === 1 && r.held.length && ++renewalsAfterPark === 1) setTimeout(() => answered.open(), 50);
            return answer;
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Store;
    try {
      const engine = makeEngine({ store, workflows: [waiter] });
      await startWorker(engine, { parkAfterMs: 0, heartbeatMs: 20, leaseMs: 60_000 });
      const { id } = await engine.start(waiter, {});
      await parkCommitted.promise;
      await answered.promise;
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'go', {});
      expect(await engine.result(id, { timeout: '20s' })).toBe('done');
      expect(started(id)).toBe(1);
      await engine.close();
    } finally {
      await inner.close();
    }
  });

  it('a kept run that may not go on, whose journal then cannot be read, hands its task back instead of holding it for a lease', async () => {
    // The workflow's deadline passes while it parks: the claim at the deadline may not resume the
    // kept run, and the journal the claim left out must be read for a replay.
    const bounded = workflow(
      'kept-unread',
      async (ctx) => {
        starts.set(ctx.taskId, started(ctx.taskId) + 1);
        await ctx.step('a', () => 1);
        await ctx.waitForEvent('confirm', { timeout: '10m' });
        return 'confirmed';
      },
      { timeout: '1m' },
    );
    const clock = new ManualClock();
    const inner = await openStore(tempDbUrl());
    let failReads = 0;
    const store = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'getSteps') {
          return async (taskId: string) => {
            if (failReads > 0) {
              failReads--;
              throw new Error('connection reset');
            }
            return inner.getSteps(taskId);
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Store;
    try {
      const engine = makeEngine({ store, workflows: [bounded], clock });
      // The test reads the task through the store itself: only the worker's reads fail.
      const reader = makeEngine({ store: inner, workflows: [bounded], clock });
      // A lease of a minute: the task ends within the test only if it is handed back.
      const worker = await startWorker(engine, { parkAfterMs: 0, leaseMs: 60_000 });
      const errors: string[] = [];
      worker.on('worker:error', ({ during }) => errors.push(during));
      failReads = 1;
      const parked = new Promise<void>((resolve) => worker.on('run:finished', ({ status }) => status === 'waiting' && resolve()));
      const { id } = await engine.start(bounded, {});
      await parked; // kept by the worker (its park alone could be seen before that)
      await clock.advance('1m'); // within the 5 minutes a parked run is kept
      await waitForStatus(reader, id, 'failed');
      const info = await reader.get(id);
      expect(info.status === 'failed' && info.error.code).toBe('DEADLINE_EXCEEDED');
      expect(errors).toEqual([`reading the journal of task ${id}`]);
      expect(transitionsOf(info).map((t) => t.event)).toEqual(['create', 'claim', 'park', 'claim', 'release', 'claim', 'fail']);
      await engine.close();
    } finally {
      await inner.close();
    }
  });

  // On PostgreSQL leases run on the database's clock, so only the worker's own count can fence the
  // run here (on SQLite the store's lease, on the engine's clock, expires too, and the worker's
  // reclaim fences the run whatever it counted).
  it.skipIf(TEST_STORE !== 'postgres')('a run whose start waited counts its lease from the claim: past it, the run fences itself at the next heartbeat', async () => {
    const bHeld = gate<string>();
    const code = async (ctx: WorkflowContext): Promise<string> => {
      await ctx.step('a', () => 1);
      await ctx.waitForEvent('go', { timeout: '10m' });
      return ctx.step('b', () => bHeld.promise);
    };
    const clock = new ManualClock();
    const inner = await openStore(tempDbUrl());
    let slowRead = false;
    // The journal read of the claim after the signal takes 40 s of the engine's clock. (That claim
    // leaves the journal out for the kept run, read then; a claim sent before the run was kept,
    // which the signal made find the task due, reads it itself: then the 40 s pass after it.)
    const store = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'getSteps') {
          return async (taskId: string) => {
            if (slowRead) {
              slowRead = false;
              await clock.advance('40s');
            }
            return inner.getSteps(taskId);
          };
        }
        if (prop === 'claim') {
          return async (request: Parameters<Store['claim']>[0]) => {
            const claimed = await inner.claim(request);
            if (slowRead && claimed.some((c) => !c.journalOmitted)) {
              slowRead = false;
              await clock.advance('40s');
            }
            return claimed;
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as Store;
    const engine = new Engine({ store, workflows: [workflow('kept-slow-start', code)], clock });
    try {
      const worker = await startWorker(engine, { parkAfterMs: 0, leaseMs: 30_000, heartbeatMs: 20 });
      const lost: number[] = [];
      worker.on('lease:lost', ({ epoch }) => lost.push(epoch));
      // The run is in the worker's keep set once its end is reported, not when its park commits: a
      // claim made before that would read the journal itself, and the slow read would not happen.
      const parked = new Promise<void>((resolve) => worker.on('run:finished', ({ status }) => status === 'waiting' && resolve()));
      const { id } = await engine.start('kept-slow-start', {});
      await parked;
      // A new definition of the workflow: the kept run may not go on, and the claim's journal is read.
      engine.register(workflow('kept-slow-start', code));
      slowRead = true;
      await engine.signal(id, 'go', {});
      await eventually(async () => lost.length > 0, 10_000, 'the run fencing itself');
      expect(lost).toEqual([2]);
    } finally {
      bHeld.open('late');
      await engine.close();
      await inner.close();
    }
  });
});
