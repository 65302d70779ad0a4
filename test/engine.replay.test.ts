import { describe, expect, it } from 'vitest';
import { workflow, type WorkflowContext } from '../src/index.ts';
import { eventually, gate, makeEngine, startWorker, waitForStatus, transitionsOf } from './support/engine.ts';

describe('checkpoint and replay', () => {
  it('returns recorded outputs of completed steps without running them again after a pause and resume', async () => {
    const runs: Record<string, number> = {};
    const count = (name: string): void => void (runs[name] = (runs[name] ?? 0) + 1);
    const hold = gate();
    const entered = gate();
    const wf = workflow('replay', async (ctx, input: { n: number }) => {
      const a = await ctx.step('a', () => (count('a'), { value: input.n + 1, at: Math.random() }));
      await ctx.step('b', async () => {
        count('b');
        entered.open();
        await hold.promise;
        return 'b';
      });
      const c = await ctx.step('c', () => (count('c'), a.value * 10));
      return { a, c };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('replay', { n: 1 });
    await entered.promise;
    await engine.pause(id); // takes effect at the next step boundary
    hold.open();
    await waitForStatus(engine, id, 'paused');
    const before = (await engine.get(id)).steps.find((s) => s.name === 'a')?.output as { at: number };
    await engine.resume(id);
    const out = await engine.result<{ a: { value: number; at: number }; c: number }>(id);
    expect(out.c).toBe(20);
    expect(out.a.at).toBe(before.at); // the recorded (random) output was reused
    expect(runs).toEqual({ a: 1, b: 1, c: 1 });
    const info = await engine.get(id);
    expect(transitionsOf(info).map((h) => h.event)).toEqual(['create', 'claim', 'pause', 'suspend', 'resume', 'claim', 'complete']);
    expect(info.runs).toBe(2);
  });

  it('gives loops and parallel steps stable identities and idempotency keys', async () => {
    const keys: string[] = [];
    const wf = workflow('loops', async (ctx) => {
      const items = await Promise.all([1, 2, 3].map((i) => ctx.step('fetch', ({ idempotencyKey }) => (keys.push(idempotencyKey), i * 2))));
      let sum = 0;
      for (const item of items) sum += await ctx.step('add', () => item);
      return sum;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('loops');
    expect(await engine.result(id)).toBe(12);
    const info = await engine.get(id);
    expect(info.steps.map((s) => s.name)).toEqual(['fetch', 'fetch#2', 'fetch#3', 'add', 'add#2', 'add#3']);
    expect(info.steps.map((s) => s.seq)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(keys.sort()).toEqual([`v1:${id}:fetch#1`, `v1:${id}:fetch#2`, `v1:${id}:fetch#3`]);
    expect(info.steps[1]?.idempotencyKey).toBe(`v1:${id}:fetch#2`);
  });

  it('stops with a non-determinism error when the code calls a different step than the journal recorded', async () => {
    const entered = gate();
    const hold = gate();
    let version = 1;
    const body = async (ctx: WorkflowContext): Promise<string> => {
      await ctx.step(version === 1 ? 'draft' : 'outline', () => 'x');
      await ctx.step('slow', async () => {
        entered.open();
        await hold.promise;
      });
      await ctx.step('publish', () => 'ok');
      return 'done';
    };
    const v1 = workflow('diverge', body, { version: 1 });
    const engine = makeEngine({ workflows: [v1] });
    await startWorker(engine);
    const { id } = await engine.start('diverge');
    await entered.promise;
    await engine.pause(id);
    hold.open();
    await waitForStatus(engine, id, 'paused');
    version = 2;
    engine.register(workflow('diverge', body, { version: 2 }));
    await engine.resume(id);
    await expect(engine.result(id)).rejects.toThrow(/failed/);
    const info = await engine.get(id);
    expect(info.status).toBe('failed');
    if (info.status !== 'failed') return;
    expect(info.error.code).toBe('NON_DETERMINISM');
    expect(info.error.message).toContain('at position 0 the code now calls step "outline", but the journal recorded step "draft"');
    expect(info.error.message).toContain('version 2, started under version 1');
    // The journal was not rewritten by the diverging code.
    expect(info.steps.map((s) => s.name)).toEqual(['draft', 'slow']);
  });

  it('detects a journal with more steps than the code now makes', async () => {
    const entered = gate();
    const hold = gate();
    let short = false;
    const wf = workflow('shrink', async (ctx) => {
      await ctx.step('one', () => 1);
      if (short) return 'short';
      await ctx.step('two', async () => {
        entered.open();
        await hold.promise;
      });
      await ctx.step('three', () => 3);
      return 'long';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('shrink');
    await entered.promise;
    await engine.pause(id);
    hold.open();
    await waitForStatus(engine, id, 'paused');
    short = true;
    await engine.resume(id);
    const err = await engine.result(id).catch((e: Error) => e);
    expect((err as Error & { cause: Error }).cause).toMatchObject({ code: 'NON_DETERMINISM' });
    expect(String((err as Error & { cause: Error }).cause.message)).toContain('journal has 1 more, starting with step "two"');
  });

  it('fails the task even if workflow code swallows the non-determinism error', async () => {
    let second = false;
    const entered = gate();
    const hold = gate();
    const wf = workflow('swallow', async (ctx) => {
      try {
        await ctx.step(second ? 'renamed' : 'original', () => 1);
      } catch {
        // user code that catches everything
      }
      await ctx.step('wait', async () => {
        if (!second) {
          entered.open();
          await hold.promise;
        }
      });
      await ctx.step('after', () => 'after');
      return 'finished';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('swallow');
    await entered.promise;
    await engine.pause(id);
    hold.open();
    await waitForStatus(engine, id, 'paused');
    second = true;
    await engine.resume(id);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.code).toBe('NON_DETERMINISM');
    expect(info.status === 'failed' && info.error.name).toBe('NonDeterminismError');
    expect(info.status === 'failed' && info.error.message).toMatch(/at position 0 the code now calls step "renamed", but the journal recorded step "original"/);
    // The swallowed error did not let the code go on: nothing after the diverging call was recorded.
    expect(info.steps.map((s) => s.name)).toEqual(['original', 'wait']);
  });

  it('refuses a step output that is not JSON data, failing the step with a clear error', async () => {
    const wf = workflow('bad-output', async (ctx) => {
      // A compile-time error where TypeScript can see the Date (see test/types.test.ts); code it
      // cannot see into still gets the run-time check.
      await ctx.step('when', () => ({ at: new Date(0) }) as unknown);
      return 'unreachable';
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('bad-output');
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/Step "when" failed after 1 attempt: The output of step "when" cannot be checkpointed: the value.at is a Date/);
    expect(info.steps[0]).toMatchObject({ name: 'when', status: 'failed', attempts: 1 });
  });

  it('lets workflow code catch a failed step and go on (optional step)', async () => {
    const wf = workflow('optional', async (ctx) => {
      const extra = await ctx
        .step(
          'enrich',
          () => {
            throw new Error('service down');
          },
          { retry: 1 },
        )
        .catch(() => null);
      return { extra, main: await ctx.step('main', () => 'ok') };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('optional');
    expect(await engine.result(id)).toEqual({ extra: null, main: 'ok' });
    expect((await engine.get(id)).steps.map((s) => `${s.name}:${s.status}`)).toEqual(['enrich:failed', 'main:completed']);
  });
});

describe('replay of concurrent branches', () => {
  it('hands recorded results back in the order the code first received them, so parallel branches keep their identities', async () => {
    const calls: string[] = [];
    const wf = workflow('branches', async (ctx) => {
      const branch = async (name: string, delayMs: number, url: string): Promise<string> => {
        await ctx.step(name, async () => {
          await new Promise((r) => setTimeout(r, delayMs));
          return name;
        });
        // Same step name in both branches: which one is `fetch` and which `fetch#2` depends on
        // which branch got there first, which depends on timing in the first run.
        return ctx.step('fetch', () => (calls.push(url), url));
      };
      const [one, two] = await Promise.all([branch('slow', 80, 'page-1'), branch('quick', 1, 'page-2')]);
      await ctx.waitForEvent('go'); // park: the next run replays everything above
      return { one, two };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { keepParked: 0 }); // not kept in memory: the signal replays the task
    const { id } = await engine.start('branches');
    await waitForStatus(engine, id, 'waiting');
    const journal = (await engine.get(id)).steps.map((s) => [s.name, s.output]);
    expect(journal).toContainEqual(['fetch', 'page-2']); // the quick branch got there first
    expect(journal).toContainEqual(['fetch#2', 'page-1']);
    await engine.signal(id, 'go', null);
    expect(await engine.result(id)).toEqual({ one: 'page-1', two: 'page-2' });
    expect(calls.sort()).toEqual(['page-1', 'page-2']); // nothing ran twice
  });

  it('keeps the identities of 40 branches whose continuations pass through microtasks and a tick callback before their next call, results arriving together', async () => {
    const calls: string[] = [];
    const wf = workflow('many-branches', async (ctx) => {
      const branch = async (i: number): Promise<string> => {
        // Several branches' first results arrive in the same timer callback: handed one per turn.
        await ctx.step(`first-${i}`, () => new Promise((r) => setTimeout(r, (i * 7) % 5)));
        await new Promise((r) => process.nextTick(r));
        for (let k = 0; k < i % 4; k++) await Promise.resolve();
        // One name for every branch: which occurrence each gets is the order of the calls.
        return ctx.step('fetch', () => (calls.push(`page-${i}`), `page-${i}`));
      };
      const pages = await Promise.all(Array.from({ length: 40 }, (_, i) => branch(i)));
      await ctx.waitForEvent('go'); // park: the next run replays everything above
      return pages;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { keepParked: 0 });
    const { id } = await engine.start('many-branches');
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'go', null);
    expect(await engine.result(id)).toEqual(Array.from({ length: 40 }, (_, i) => `page-${i}`));
    expect(calls).toHaveLength(40); // nothing ran twice: every branch found its own recorded call
  });

  it('does not let a step re-run after a crash overtake results recorded before it', async () => {
    // First run: `long` is in flight while `a` and then `b` complete; the run stops (pause).
    // Second run: `long` runs again live and finishes fast; it must not hand its result over
    // before `a` and `b` are replayed, or the branch after it would take their positions.
    // The first run's `long` waits on a gate that opens only after the worker has stopped, so
    // it is still in flight however slowly `a`, `b` and `c` are written.
    const held = gate();
    let firstRun = true;
    const order: string[] = [];
    const wf = workflow('overtake', async (ctx) => {
      const slow = (async () => {
        await ctx.step('long', async () => {
          if (firstRun) await held.promise;
          else await new Promise((r) => setTimeout(r, 1));
          return 'long';
        });
        order.push('after-long');
        return ctx.step('x', () => 'x');
      })();
      const quick = (async () => {
        await ctx.step('a', () => 'a');
        order.push('after-a');
        await ctx.step('b', () => 'b');
        order.push('after-b');
        return ctx.step('c', () => 'c');
      })();
      return Promise.all([slow, quick]);
    });
    const engine = makeEngine({ workflows: [wf] });
    const worker = await startWorker(engine);
    const { id } = await engine.start('overtake');
    // Stop the worker while `long` runs (after a, b, c completed): the task is released.
    const completed = async (): Promise<string[]> => (await engine.get(id)).steps.filter((s) => s.status === 'completed').map((s) => s.name);
    await eventually(async () => (await completed()).length >= 3, 30_000, 'a, b and c to complete');
    expect(await completed()).toEqual(['a', 'b', 'c']);
    await worker.stop({ graceMs: 0 });
    expect((await engine.get(id)).status).toBe('pending');
    firstRun = false;
    held.open(); // the abandoned attempt of `long` ends now; its result is not recorded
    order.length = 0;
    await startWorker(engine);
    expect(await engine.result(id)).toEqual(['x', 'c']);
    expect(order.indexOf('after-long')).toBeGreaterThan(order.indexOf('after-b'));
    expect((await engine.get(id)).steps.map((s) => s.name)).toEqual(['long', 'a', 'b', 'c', 'x']);
  });
});

describe('waiting on several things at once', () => {
  it('waits for the first of several events with one wait, round after round', async () => {
    const wf = workflow('review-rounds', async (ctx) => {
      const decisions: string[] = [];
      for (let round = 1; round <= 2; round++) {
        const d = await ctx.waitForEvent<string>(['approve', 'reject']);
        decisions.push(d.timedOut ? 'timeout' : `${d.name}:${d.payload}`);
      }
      return decisions;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('review-rounds');
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.explain(id)).summary).toMatch(/Waiting for event "approve" or "reject" \(no timeout\)/);
    await engine.signal(id, 'approve', 'round 1');
    await new Promise((r) => setTimeout(r, 50));
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'reject', 'round 2');
    expect(await engine.result(id)).toEqual(['approve:round 1', 'reject:round 2']);
  });

  it('times out a wait for an event in-process while other work is still running', async () => {
    const wf = workflow('race-timeout', async (ctx) => {
      const [ev] = await Promise.all([ctx.waitForEvent('never', { timeout: '200ms' }), ctx.step('busy', () => new Promise((r) => setTimeout(r, 600)))]);
      return ev;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { parkAfterMs: 50 });
    const { id } = await engine.start('race-timeout');
    expect(await engine.result(id)).toEqual({ timedOut: true });
  });

  it('ends a long sleep in-process when it is due while a step is still running', async () => {
    // The step answers only after the task has ended (not after a timer a slow machine could let
    // run out first): the result can only come from the sleep, ended while the step still ran.
    const answer = gate();
    const wf = workflow('deadline', async (ctx) => Promise.race([ctx.step('slow-llm', () => answer.promise.then(() => 'answer')), ctx.sleep('deadline', 300).then(() => 'deadline')]));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { parkAfterMs: 100 });
    const { id } = await engine.start('deadline');
    try {
      expect(await engine.result(id, { timeout: '20s' })).toBe('deadline');
    } finally {
      answer.open();
    }
  });

  it('parks on every wait of a Promise.race and wakes on whichever event arrives', async () => {
    const wf = workflow('race-events', async (ctx) => {
      const result = await Promise.race([
        ctx.waitForEvent<string>('approve').then((e) => ({ decision: 'approve', e })),
        ctx.waitForEvent<string>('reject').then((e) => ({ decision: 'reject', e })),
      ]);
      return ctx.step('record', () => result.decision);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('race-events');
    await waitForStatus(engine, id, 'waiting');
    expect((await engine.explain(id)).summary).toMatch(/Waiting for the first of: event "approve" \(no timeout\); event "reject" \(no timeout\)/);
    await engine.signal(id, 'reject', 'no');
    expect(await engine.result(id)).toBe('reject');
  });

  it('wakes a task racing a long sleep against an event when the event comes first', async () => {
    const wf = workflow('race-sleep', async (ctx) => {
      const winner = await Promise.race([ctx.sleep('deadline', '1h').then(() => 'deadline'), ctx.waitForEvent('x').then(() => 'event')]);
      return ctx.step('winner', () => winner);
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine, { parkAfterMs: 1000 });
    const { id } = await engine.start('race-sleep');
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'x', 1);
    expect(await engine.result(id, { timeout: '10s' })).toBe('event');
  });
});
