// checkResume (stepwise-engine/testing): a workflow's worker is crashed right before and right
// after each durable write, a new worker finishes the task, and the result must be the run's
// without a crash. Each workflow below is checked on SQLite (a temporary file per run); the
// broken ones show that each kind of mistake is caught, with a message that names the crash point.
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ERROR_CODES, machine, workflow, type Workflow } from '../src/index.ts';
import { ManualClock, checkResume, isResumeCheckError, type ResumeCheckError } from '../src/testing/index.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const schemas: string[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const s of schemas.splice(0)) await dropSchema(s);
});

/** The ResumeCheckError `p` rejects with (fails the test if it resolves or rejects otherwise). */
async function failure(p: Promise<unknown>): Promise<ResumeCheckError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!isResumeCheckError(e)) throw new Error(`expected a ResumeCheckError, got ${e instanceof Error ? e.stack : String(e)}`);
  return e;
}

const threeSteps = workflow('three-steps', async (ctx, input: { topic: string }) => {
  const notes = await ctx.step('research', () => `notes on ${input.topic}`);
  const draft = await ctx.step('draft', () => `${notes}, drafted`);
  return ctx.step('publish', () => ({ url: `/posts/${draft.length}` }));
});

describe('checkResume: a correct workflow', () => {
  it('passes at every crash point, and the report lists each with the step it interrupted and the steps that ran again', async () => {
    const report = await checkResume(threeSteps, { input: { topic: 'durable agents' } });
    expect(report.workflow).toBe('three-steps');
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: { url: '/posts/32' } });
    expect(report.baseline.attempts.map((a) => [a.step, a.attempt, a.idempotencyKey.replace(/:[0-9a-z]{26}:/, ':<task>:')])).toEqual([
      ['research', 1, 'v1:<task>:research#1'],
      ['draft', 1, 'v1:<task>:draft#1'],
      ['publish', 1, 'v1:<task>:publish#1'],
    ]);
    // One durable write per step: the last one goes with the task's completion.
    expect(report.baseline.writes.map((w) => w.what)).toEqual(['the result of step "research"', 'the result of step "draft"', 'the complete transition with the result of step "publish"']);
    expect(report.points.map((p) => ({ at: `${p.when} ${p.write}/${p.of}`, reached: p.reached, interrupted: p.interrupted, ranAgain: p.ranAgain }))).toEqual([
      { at: 'before 1/3', reached: true, interrupted: ['research'], ranAgain: ['research'] },
      { at: 'after 1/3', reached: true, interrupted: [], ranAgain: [] },
      { at: 'before 2/3', reached: true, interrupted: ['draft'], ranAgain: ['draft'] },
      { at: 'after 2/3', reached: true, interrupted: [], ranAgain: [] },
      { at: 'before 3/3', reached: true, interrupted: ['publish'], ranAgain: ['publish'] },
      { at: 'after 3/3', reached: true, interrupted: [], ranAgain: [] },
    ]);
  });

  it('passes a step that is not idempotent itself but hands its idempotencyKey to an API that deduplicates', async () => {
    const payments = fakePayments();
    const checkout = workflow('checkout', async (ctx, input: { cents: number }) => {
      const order = await ctx.step('order', () => ({ cents: input.cents }));
      const charge = await ctx.step('charge', ({ idempotencyKey }) => payments.charge(order.cents, idempotencyKey));
      await ctx.step('receipt', () => `receipt for ${charge.id}`);
      return charge;
    });
    const report = await checkResume(checkout, { input: { cents: 1200 }, setup: () => payments.reset(), effects: () => payments.charges() });
    expect(report.baseline.effects).toEqual([{ cents: 1200 }]);
    // The charge ran again where its checkpoint was lost; the API answered with the first charge.
    expect(report.points.filter((p) => p.ranAgain.includes('charge')).map((p) => `${p.when} ${p.write}`)).toEqual(['before 2']);
    // In that run the API was called twice (before the crash and after it) and charged once.
    expect(payments.callsPerRun).toEqual([1, 1, 1, 2, 1, 1, 1]);
  });

  it('drives a workflow that waits for a signal and sleeps an hour: the signal is sent when the task waits, the clock moved to its wake-up', async () => {
    const cms = fakeCms();
    let clock = new ManualClock();
    const review = workflow('review-then-publish', async (ctx, input: { topic: string }) => {
      const draft = await ctx.step('draft', () => `draft on ${input.topic}`);
      const verdict = await ctx.waitForEvent<{ approved: boolean }>('review', { timeout: '2d' });
      if (verdict.timedOut || !verdict.payload.approved) return { published: false };
      await ctx.sleep('cool-down', '1h');
      const page = await ctx.step('publish', ({ idempotencyKey }) => cms.publish(draft, idempotencyKey, clock.now()));
      return { published: true, page };
    });
    const report = await checkResume(review, {
      input: { topic: 'leases' },
      signals: { review: { approved: true } },
      setup: (run) => {
        clock = run.clock;
        cms.reset();
      },
      effects: () => cms.pages(),
    });
    const start = Date.UTC(2030, 0, 1);
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: { published: true, page: { id: 1, at: start + 3_600_000 } } });
    expect(report.baseline.effects).toEqual([{ text: 'draft on leases', at: start + 3_600_000 }]);
    expect(report.baseline.writes.map((w) => w.what)).toEqual([
      'the result of step "draft"',
      'the park transition with the start of event wait "review"',
      'the event received by event wait "review"',
      'the park transition with the start of sleep "cool-down"',
      'the end of sleep "cool-down"',
      'the complete transition with the result of step "publish"',
    ]);
    expect(report.points).toHaveLength(12);
    expect(report.points.every((p) => p.reached)).toBe(true);
  });

  it("passes a transactional step (its rows commit with its checkpoint): setup creates the table in each run's database, effects reads it", async () => {
    const orders = workflow('save-order', async (ctx, input: { id: number }) => {
      const saved = await ctx.transaction('save', async (tx) => {
        await tx.execute('INSERT INTO orders (id, total) VALUES (?, ?)', [input.id, input.id * 10]);
        return { saved: input.id };
      });
      await ctx.step('confirm', () => `order ${saved.saved} saved`);
      return saved;
    });
    const withDb = <T>(url: string, fn: (db: Database.Database) => T): T => {
      const db = new Database(url.slice('sqlite:'.length));
      try {
        return fn(db);
      } finally {
        db.close();
      }
    };
    const report = await checkResume(orders, {
      input: { id: 7 },
      setup: (run) => withDb(run.database, (db) => db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)')),
      effects: (run) => withDb(run.database, (db) => db.prepare('SELECT * FROM orders').all()),
    });
    expect(report.baseline.effects).toEqual([{ id: 7, total: 70 }]);
    expect(report.baseline.writes.map((w) => w.what)).toEqual(['the transaction of step "save" with its checkpoint', 'the complete transition with the result of step "confirm"']);
    // Before its commit, the transaction ran again after the crash (nothing of it was durable); after, it did not.
    expect(report.points.slice(0, 2).map((p) => p.ranAgain)).toEqual([['save'], []]);
  });

  it('passes a workflow that fails for good the same way at every crash point (errors compared by code and message)', async () => {
    const failing = workflow('failing', async (ctx) => {
      await ctx.step('fetch', () => 'page');
      await ctx.step(
        'parse',
        () => {
          throw new Error('no title in the page');
        },
        { retry: { maxAttempts: 2, initialDelay: '1m' } },
      );
    });
    const report = await checkResume(failing);
    expect(report.baseline.outcome).toMatchObject({ status: 'failed', error: { code: 'STEP_FAILED' } });
    expect(report.baseline.attempts.map((a) => `${a.step}#${a.attempt}`)).toEqual(['fetch#1', 'parse#1', 'parse#2']);
    expect(report.points.length).toBeGreaterThanOrEqual(6);
  });

  it('asks onWait about waits the options do not answer, once per park, and moves a shared clock forward run after run', async () => {
    const clock = new ManualClock();
    const asked: string[][] = [];
    const choose = workflow('choose', async (ctx) => {
      await ctx.step('draft', () => 'text');
      const answer = await ctx.waitForEvent<string>(['approve', 'reject'], { timeout: '1d' });
      await ctx.sleep('settle', '1h');
      return ctx.step('record', () => (answer.timedOut ? 'timed out' : `${answer.name}: ${answer.payload}`));
    });
    const report = await checkResume(choose, {
      clock,
      onWait: async (wait) => {
        asked.push(wait.events);
        await wait.signal('approve', 'looks good');
      },
    });
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: 'approve: looks good' });
    // Asked once per park on the events (a crash before the park's write parks again in the new worker).
    expect(asked.length).toBeGreaterThanOrEqual(1 + report.points.length);
    expect(asked.every((events) => events.join() === 'approve,reject')).toBe(true);
    // Every run slept its hour on the one clock.
    expect(clock.now()).toBeGreaterThanOrEqual(Date.UTC(2030, 0, 1) + (1 + report.points.length) * 3_600_000);
  });

  it('decides the approvals the task waits for, as the approvers listed', async () => {
    const approval = workflow('approved-post', async (ctx) => {
      const draft = await ctx.step('draft', () => 'text');
      const review = await ctx.approval('review', { approvers: ['editor'], payload: { draft } });
      return ctx.step('publish', () => ({ published: review.approved, by: review.by }));
    });
    const report = await checkResume(approval, { approvals: { review: { approve: true } } });
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: { published: true, by: 'editor' } });
    expect(report.points.length).toBeGreaterThanOrEqual(6);
  });
});

describe('checkResume: a state machine', () => {
  it('drives a machine through its states with the events it waits for (sent with engine.send), at every crash point', async () => {
    const published: string[] = [];
    const order = machine('order-check', {
      initial: 'drafting',
      context: (input: { item: string }) => ({ item: input.item, note: '' }),
      states: {
        drafting: {
          entry: async (ctx, { context }) => ({ event: 'drafted', context: { ...context, note: await ctx.step('draft', () => `order of ${context.item}`) } }),
          on: { drafted: 'review' },
        },
        review: { on: { approve: { target: 'placing', assign: (c, e) => ({ ...c, note: `${c.note}, ok by ${String((e.payload as { by?: unknown }).by)}` }) }, reject: 'rejected' } },
        // The shop deduplicates on the key: placing again after a crash places nothing new.
        placing: {
          entry: async (ctx) => {
            await ctx.step('place', ({ idempotencyKey }) => void (published.includes(idempotencyKey) || published.push(idempotencyKey)));
            return 'placed';
          },
          on: { placed: 'done' },
        },
        done: { type: 'final' },
        rejected: { type: 'final' },
      },
    });
    const report = await checkResume(order, {
      input: { item: 'book' },
      signals: { approve: { by: 'ada' } },
      setup: () => void published.splice(0),
      effects: () => ({ placed: published.length }),
    });
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: { state: 'done', context: { item: 'book', note: 'order of book, ok by ada' } } });
    expect(report.baseline.effects).toEqual({ placed: 1 });
    expect(report.points.length).toBeGreaterThanOrEqual(2 * 5);
    expect(report.points.every((p) => p.reached)).toBe(true);
  });
});

describe('checkResume: mistakes it catches', () => {
  it('a side effect in the workflow body (a counter outside any step) makes the outside world differ', async () => {
    let reminders = 0;
    const leaky = workflow('leaky', async (ctx) => {
      const draft = await ctx.step('draft', () => 'text');
      reminders++; // a side effect outside any step: it happens again on every replay
      await ctx.step('publish', () => draft.length);
      return { draft };
    });
    const e = await failure(checkResume(leaky, { setup: () => void (reminders = 0), effects: () => ({ reminders }) }));
    expect(e.reason).toBe('effects-differ');
    expect(e.point).toMatchObject({ write: 1, when: 'before', what: 'the result of step "draft"' });
    expect(e.message).toContain('checkResume("leaky"): the worker died before write 1 of 2 (the result of step "draft") became durable');
    expect(e.message).toContain('at .reminders: 1 without a crash, 2 after it');
    expect(e.message).toContain('outside ctx.step');
  });

  it('a counter in the workflow body that reaches the output makes the output differ', async () => {
    let issued = 0;
    const numbered = workflow('numbered', async (ctx) => {
      const ticket = ++issued; // outside any step
      await ctx.step('work', () => 'done');
      return { ticket };
    });
    const e = await failure(checkResume(numbered, { setup: () => void (issued = 0) }));
    expect(e.reason).toBe('outcome-differs');
    expect(e.point).toMatchObject({ write: 1, when: 'before' });
    expect(e.message).toContain("the task's output differs from the run without a crash at .ticket: 1 without a crash, 2 after it");
  });

  it('a branch on Math.random() outside any step is NON_DETERMINISM or other calls once the task resumes', async () => {
    // The workflow's own calls alternate; the engine's (jitter of its timers) stay random, so their
    // number cannot shift which side the workflow gets.
    const random = Math.random.bind(Math);
    let n = 0;
    let mine = false;
    vi.spyOn(Math, 'random').mockImplementation(() => (mine ? (n++ % 2 ? 0.75 : 0.25) : random()));
    const coin = workflow('coin', async (ctx) => {
      mine = true;
      const heads = Math.random() < 0.5; // decided outside any step: differs on replay
      mine = false;
      const first = await ctx.step(heads ? 'heads' : 'tails', () => 1);
      return ctx.step('second', () => first + 1);
    });
    const e = await failure(checkResume(coin));
    expect(['non-determinism', 'calls-differ']).toContain(e.reason);
    expect(e.message).toMatch(/NON_DETERMINISM|other calls/);
    expect(e.message).toContain('Math.random()');
  });

  it('a step without its idempotencyKey charges twice when it runs again after a crash', async () => {
    const payments = fakePayments();
    const careless = workflow('careless-checkout', async (ctx) => {
      await ctx.step('charge', () => payments.charge(1200, null));
      return ctx.step('receipt', () => 'receipt sent');
    });
    const e = await failure(checkResume(careless, { setup: () => payments.reset(), effects: () => payments.charges() }));
    expect(e.reason).toBe('effects-differ');
    expect(e.point).toMatchObject({ write: 1, when: 'before', what: 'the result of step "charge"' });
    expect(e.message).toContain('Steps that ran again: "charge"');
    expect(e.report?.points.at(-1)).toMatchObject({ interrupted: ['charge'], ranAgain: ['charge'] });
    // It leaves no timer behind (a script that runs the check exits as soon as it is done).
    const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    await failure(checkResume(careless, { setup: () => payments.reset(), effects: () => payments.charges() }));
    expect(timers()).toBeLessThanOrEqual(before);
  });

  it('a business key built from a counter gives the step another key when it runs again', async () => {
    let made = 0;
    const keyed = workflow('keyed', async (ctx) => {
      const key = `invoice-${++made}`; // outside any step: another key on every replay
      return ctx.step('invoice', () => 'sent', { key });
    });
    const e = await failure(checkResume(keyed, { setup: () => void (made = 0) }));
    expect(e.reason).toBe('key-changed');
    expect(e.message).toContain('step "invoice" ran again with idempotency key "v1:invoice-2", but its attempt before the crash had "v1:invoice-1"');
  });

  it('a task that waits for a signal nobody sends does not finish: the message says what to pass', async () => {
    const waits = workflow('waits', async (ctx) => {
      await ctx.step('draft', () => 'text');
      return ctx.waitForEvent('review');
    });
    const e = await failure(checkResume(waits));
    expect(e.reason).toBe('not-finished');
    expect(e.point).toBeNull();
    expect(e.message).toContain('it waits for event "review" with no timeout, and nothing answered it (pass signals: { "review": payload }');
  });
});

describe.skipIf(!(await hasPostgres()))('checkResume on PostgreSQL', () => {
  const freshSchema = (): string => {
    const schema = freshSchemaName('sw_check');
    schemas.push(schema);
    return `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  };

  // A statement a dead worker sent before its crash point may commit after it (its heartbeat, on a
  // pooled connection): the new worker takes over only once it has landed (ProcessStore.settled).
  it('passes a correct workflow at every crash point, each run on a fresh schema', async () => {
    const report = await checkResume(threeSteps, { input: { topic: 'pg' }, database: freshSchema });
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: { url: '/posts/20' } });
    expect(report.points.map((p) => `${p.when} ${p.write}/${p.of}: ${p.ranAgain.join(',')}`)).toEqual([
      'before 1/3: research',
      'after 1/3: ',
      'before 2/3: draft',
      'after 2/3: ',
      'before 3/3: publish',
      'after 3/3: ',
    ]);
  });
});

describe('checkResume: options', () => {
  it('refuses bad options with INVALID_ARGUMENT', async () => {
    const cases: Array<[unknown, unknown, RegExp]> = [
      [{ name: 'x' }, {}, /first argument must be a workflow/],
      [threeSteps, { inputs: {} }, /unknown option "inputs" \(known: input,/],
      [threeSteps, { setup: 'reset' }, /setup must be a function/],
      [threeSteps, { signals: [{ payload: 1 }] }, /signals\[0\] must be \{ name: string, payload\? \}/],
      [threeSteps, { signals: 'review' }, /signals must be an object/],
      [threeSteps, { approvals: { review: { by: 'editor' } } }, /approvals\["review"\] must be \{ approve: true \| false/],
      [threeSteps, { timeout: 0 }, /timeout must be longer than 0/],
      [threeSteps, { timeout: 'soon' }, /timeout/],
      [threeSteps, { clock: { now: () => 0 } }, /clock must be a ManualClock/],
      [threeSteps, { clock: () => ({}) }, /clock\(\) must return a ManualClock/],
      [threeSteps, { database: () => 42 }, /database\(\) must return a store URL/],
      [threeSteps, null, /options must be an object/],
    ];
    for (const [wf, options, message] of cases) {
      const e = await checkResume(wf as Workflow, options as object).then(
        () => null,
        (err: unknown) => err as { code?: string; message: string },
      );
      expect(e?.code, `${JSON.stringify(options)}`).toBe(ERROR_CODES.INVALID_ARGUMENT);
      expect(e?.message).toMatch(message);
    }
  });
});

/** A payment API that deduplicates on the idempotency key it is given (none: charges every time). */
function fakePayments() {
  let charges: Array<{ key: string | null; cents: number }> = [];
  const api = {
    /** Calls of `charge` in each run since the first reset. */
    callsPerRun: [] as number[],
    reset() {
      charges = [];
      api.callsPerRun.push(0);
    },
    charge(cents: number, key: string | null) {
      api.callsPerRun[api.callsPerRun.length - 1]! += 1;
      const seen = key === null ? -1 : charges.findIndex((c) => c.key === key);
      if (seen >= 0) return { id: `ch_${seen + 1}` };
      charges.push({ key, cents });
      return { id: `ch_${charges.length}` };
    },
    charges: () => charges.map((c) => ({ cents: c.cents })),
  };
  return api;
}

/** A CMS that deduplicates publications on the idempotency key. */
function fakeCms() {
  let pages: Array<{ key: string; text: string; at: number }> = [];
  return {
    reset() {
      pages = [];
    },
    publish(text: string, key: string, at: number) {
      const seen = pages.findIndex((p) => p.key === key);
      if (seen >= 0) return { id: seen + 1, at: (pages[seen] as { at: number }).at };
      pages.push({ key, text, at });
      return { id: pages.length, at };
    },
    pages: () => pages.map((p) => ({ text: p.text, at: p.at })),
  };
}
