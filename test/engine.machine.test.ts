// Business state machines (`machine()`): states with events, guards, context updates, entry
// actions and timeouts, run durably as workflows; engine.send takes an event only while the machine
// waits in a state that takes it (EVENT_REFUSED otherwise, naming the events it takes).
import { describe, expect, it } from 'vitest';
import { Engine, ERROR_CODES, InvalidArgumentError, machine, machineDiagram, machineGraph, type MachineInfo } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, gate, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

/** The content pipeline of the seed article: generate → review (a person) → publish → published. */
function publishing(effects: string[]) {
  return machine('publish-article', {
    initial: 'generating',
    context: (input: { topic: string; limit?: number }) => ({ topic: input.topic, limit: input.limit ?? 3, draft: '', approvedBy: null as string | null }),
    states: {
      generating: {
        entry: async (ctx, { context }) => {
          const draft = await ctx.step('generate', () => {
            effects.push('generate');
            return `About ${context.topic}`;
          });
          return { event: 'generated', context: { ...context, draft } };
        },
        on: { generated: 'review' },
      },
      review: {
        on: {
          approve: { target: 'publishing', guard: (c, e) => ((e.payload as { edits?: number } | null)?.edits ?? 0) <= c.limit, assign: (c, e) => ({ ...c, approvedBy: e.by.id }) },
          reject: 'rejected',
        },
        after: { '2d': 'expired' },
      },
      publishing: {
        entry: async (ctx, { context }) => {
          await ctx.step('publish', ({ idempotencyKey }) => void effects.push(`publish ${context.draft} ${idempotencyKey.split(':').at(-1)}`));
          return 'published';
        },
        on: { published: 'published' },
      },
      published: { type: 'final' },
      rejected: { type: 'final' },
      expired: { type: 'final' },
    },
  });
}

async function machineOf(engine: Engine, id: string): Promise<MachineInfo | undefined> {
  return (await engine.get(id)).machine;
}

/** Waits until the machine waits in `state`. */
async function waitsIn(engine: Engine, id: string, state: string): Promise<MachineInfo> {
  let info: MachineInfo | undefined;
  await eventually(async () => (info = await machineOf(engine, id))?.state === state && (info?.legalEvents.length ?? 0) > 0, 10_000, `the machine to wait in ${state}`);
  return info as MachineInfo;
}

describe(`state machines (${TEST_STORE})`, () => {
  it("walks the article's pipeline: the entry actions run once, the review waits for a person, the events it does not take are refused", async () => {
    const effects: string[] = [];
    const wf = publishing(effects);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, { topic: 'durable agents' });
    const review = await waitsIn(engine, id, 'review');
    expect(review).toMatchObject({ state: 'review', legalEvents: ['approve', 'reject'], context: { topic: 'durable agents', draft: 'About durable agents' } });
    expect(review.history.map((h) => [h.state, h.event, h.from])).toEqual([
      ['generating', null, null],
      ['review', 'generated', 'generating'],
    ]);
    expect((await engine.get(id)).status).toBe('waiting');

    const refused = engine.send(id, 'publish');
    await expect(refused).rejects.toMatchObject({ code: ERROR_CODES.EVENT_REFUSED, state: 'review', legalEvents: ['approve', 'reject'], reason: 'not-in-state' });
    await expect(refused).rejects.toThrow(
      /Cannot send "publish" to task \S+ in state "review": state "review" takes no event "publish" \(its events: approve, reject\)\. It takes "approve", "reject" now\. Nothing was sent\./,
    );

    expect(await engine.send(id, 'approve', { edits: 1 }, { by: 'alice' })).toEqual({ created: true, state: 'review', delivered: 'accepted' });
    expect(await engine.result(id)).toEqual({ state: 'published', context: { topic: 'durable agents', limit: 3, draft: 'About durable agents', approvedBy: 'alice' } });
    expect(effects).toEqual(['generate', 'publish About durable agents publish#1']);
    const done = await machineOf(engine, id);
    expect(done?.history.map((h) => `${h.from ?? '∅'} -${h.event ?? ''}-> ${h.state}`)).toEqual([
      '∅ --> generating',
      'generating -generated-> review',
      'review -approve-> publishing',
      'publishing -published-> published',
    ]);
    expect(done?.history[2]?.by).toEqual({ kind: 'user', id: 'alice' });
    expect(done?.legalEvents).toEqual([]);
    await expect(engine.send(id, 'approve')).rejects.toMatchObject({ code: ERROR_CODES.EVENT_REFUSED, reason: 'ended', state: 'published' });
  });

  it('takes exactly one of two events sent at once; the other is refused as busy, and a repeated key gets the first answer', async () => {
    const wf = publishing([]);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, { topic: 'x' });
    await waitsIn(engine, id, 'review');
    const answers = await Promise.allSettled([engine.send(id, 'approve', null, { idempotencyKey: 'a-1' }), engine.send(id, 'reject', null, { idempotencyKey: 'r-1' })]);
    const taken = answers.filter((a) => a.status === 'fulfilled');
    expect(taken).toHaveLength(1);
    const loser = answers.find((a) => a.status === 'rejected') as PromiseRejectedResult;
    expect(loser.reason).toMatchObject({ code: ERROR_CODES.EVENT_REFUSED });
    const final = (await engine.result(id)) as { state: string };
    expect(['published', 'rejected']).toContain(final.state);
    const winner = final.state === 'published' ? ['approve', 'a-1'] : ['reject', 'r-1'];
    expect(await engine.send(id, winner[0] as string, null, { idempotencyKey: winner[1] })).toEqual({ created: false, state: null, delivered: 'consumed' });
    await expect(engine.send(id, winner[0] as string, { other: true }, { idempotencyKey: winner[1] })).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT });
  });

  it('checks guards when the event is sent, with the context the journal records; assign updates the context', async () => {
    const wf = publishing([]);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, { topic: 'x', limit: 2 });
    await waitsIn(engine, id, 'review');
    await expect(engine.send(id, 'approve', { edits: 5 }, { by: 'bob' })).rejects.toMatchObject({ code: ERROR_CODES.EVENT_REFUSED, reason: 'guard', legalEvents: ['approve', 'reject'] });
    expect((await machineOf(engine, id))?.state).toBe('review');
    await engine.send(id, 'approve', { edits: 2 }, { by: 'carol' });
    expect(await engine.result(id)).toMatchObject({ context: { approvedBy: 'carol' } });
  });

  it('an engine without the definition sends too; the worker refuses an event its guards reject, records it and goes on waiting', async () => {
    const wf = publishing([]);
    const url = tempDbUrl();
    const engine = new Engine({ store: url, workflows: [wf] });
    const blind = new Engine({ store: url });
    try {
      await engine.worker({ pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000 }).start();
      const { id } = await engine.start(wf, { topic: 'x', limit: 0 });
      await waitsIn(engine, id, 'review');
      // The definitionless engine cannot check the guard: the event is taken, then refused by the worker.
      expect(await blind.send(id, 'approve', { edits: 4 }, { by: 'dave' })).toEqual({ created: true, state: null, delivered: 'accepted' });
      await eventually(
        async () => ((await machineOf(engine, id))?.refused.length ?? 0) === 1 && (await machineOf(engine, id))?.legalEvents.length === 2,
        10_000,
        'the refusal recorded and the machine waiting again',
      );
      const info = await machineOf(blind, id);
      expect(info).toMatchObject({ state: 'review', legalEvents: ['approve', 'reject'], refused: [{ state: 'review', event: 'approve', by: { kind: 'user', id: 'dave' } }] });
      await expect(blind.send(id, 'nonsense')).rejects.toMatchObject({ code: ERROR_CODES.EVENT_REFUSED, reason: 'not-in-state', legalEvents: ['approve', 'reject'] });
      await blind.send(id, 'reject');
      expect(await engine.result(id)).toMatchObject({ state: 'rejected' });
    } finally {
      await blind.close();
      await engine.close();
    }
  });

  it("refuses events while the state's entry action runs (busy), and takes them once the machine waits", async () => {
    const release = gate();
    const wf = machine('slow-start', {
      initial: 'loading',
      states: {
        loading: {
          entry: async (ctx) => {
            await ctx.step('load', () => release.promise);
          },
          on: { go: 'done' },
        },
        done: { type: 'final' },
      },
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'running');
    await eventually(async () => (await machineOf(engine, id))?.state === 'loading', 10_000, 'the machine in loading');
    await expect(engine.send(id, 'go')).rejects.toMatchObject({ code: ERROR_CODES.EVENT_REFUSED, reason: 'busy', state: 'loading', legalEvents: [] });
    release.open();
    await waitsIn(engine, id, 'loading');
    await engine.send(id, 'go');
    expect(await engine.result(id)).toMatchObject({ state: 'done' });
  });

  it('leaves a state when its timeout passes on the engine clock, counted from when it entered it', async () => {
    const clock = new ManualClock();
    const wf = publishing([]);
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const entered = clock.now(); // the clock stands still until it is advanced below
    const { id } = await engine.start(wf, { topic: 'x' });
    await waitsIn(engine, id, 'review');
    const due = entered + 48 * 3_600_000;
    await eventually(async () => (await engine.get(id)).runAt === due, 10_000, 'the task to wake up two days after it entered review');
    // 47 hours later the task still waits in review, its wake-up an hour away.
    await clock.advance('47h');
    const waiting = await engine.get(id);
    expect(waiting).toMatchObject({ status: 'waiting', runAt: due });
    expect((await machineOf(engine, id))?.state).toBe('review');
    await clock.advance('1h');
    expect(await engine.result(id)).toMatchObject({ state: 'expired' });
    const info = await machineOf(engine, id);
    expect(info?.history.at(-1)).toMatchObject({ state: 'expired', event: 'after:2d', from: 'review', by: { kind: 'system', id: 'timeout' } });
  });

  it('fails a task whose entry action returns an event its state does not take, naming both', async () => {
    const wf = machine('confused', {
      initial: 'a',
      states: { a: { entry: () => 'jump', on: { next: 'b' } }, b: { type: 'final' } },
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error.message).toMatch(/entry action of state "a" returned event "jump", which the state does not take \("next"\)/);
  });

  it('checks the definition when it is made: targets, the initial state, final states, dead ends, names', () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ initial: 'x', states: { a: { type: 'final' } } }, /initial must be one of the states \(a\)/],
      [{ initial: 'a', states: { a: { on: { go: 'nowhere' } } } }, /state "a", event "go": target "nowhere" is not a state/],
      [{ initial: 'a', states: { a: { type: 'final', on: { go: 'a' } } } }, /state "a" is final/],
      [{ initial: 'a', states: { a: {} } }, /state "a" has no entry action, events or timeouts/],
      [{ initial: 'a', states: { a: { on: { 'bad name': 'a' } } } }, /event name "bad name" is not valid/],
      [{ initial: 'a', states: { 'a b': { type: 'final' } } }, /state name "a b" is not valid/],
      [{ initial: 'a', states: { a: { after: { soon: 'a' } } } }, /after "soon"/],
      [
        { initial: 'a', states: { a: { on: { go: [{ target: 'b' }, { target: 'b', guard: () => true }] } }, b: { type: 'final' } } },
        /only the last of several transitions may go without a guard/,
      ],
      [{ initial: 'a', states: { a: { type: 'final', colour: 'red' } } }, /unknown key "colour"/],
      [{ initial: 'a', stats: {} }, /unknown key "stats"/],
    ];
    for (const [def, message] of bad) {
      expect(() => machine('m', def as never), String(message)).toThrow(InvalidArgumentError);
      expect(() => machine('m', def as never), String(message)).toThrow(message);
    }
    expect(() => machine('m', { initial: 'a', states: { a: { type: 'final' } } }, { signals: {} } as never)).toThrow(/not signals/);
  });

  it("checks an event's payload against its schema before sending it (INVALID_INPUT), when the engine has the definition", async () => {
    const approveSchema = {
      parse: (v: unknown) => {
        if (typeof (v as { edits?: unknown } | null)?.edits !== 'number') throw new Error('edits must be a number');
        return v;
      },
    };
    const base = publishing([]);
    const wf = machine(
      'publish-checked',
      { initial: 'review', states: { review: { on: { approve: 'done', reject: 'done' } }, done: { type: 'final' } } },
      { events: { approve: approveSchema } },
    );
    const engine = makeEngine({ workflows: [wf, base] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitsIn(engine, id, 'review');
    await expect(engine.send(id, 'approve', { edits: 'many' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_INPUT });
    await expect(engine.send(id, 'approve', { edits: 'many' })).rejects.toThrow(/the payload of event "approve" to task \S+ fails its schema, and was not sent: edits must be a number/);
    expect((await machineOf(engine, id))?.legalEvents).toEqual(['approve', 'reject']);
    await engine.send(id, 'approve', { edits: 1 });
    expect(await engine.result(id)).toMatchObject({ state: 'done' });
    expect(() => machine('m', { initial: 'a', states: { a: { on: { go: 'a' } } } }, { events: { stop: approveSchema } })).toThrow(/events\.stop is not an event of any state \(events: go\)/);
    expect(() => machine('m', { initial: 'a', states: { a: { on: { go: 'a' } } } }, { events: { go: {} as never } })).toThrow(/events\.go must be a schema/);
  });

  it('refuses plain signals named like machine events, and draws its diagram and graph', async () => {
    const wf = publishing([]);
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start(wf, { topic: 'x' });
    await expect(engine.signal(id, 'machine:approve')).rejects.toThrow(/reserved for the events of state machines/);
    expect(machineDiagram(wf)).toBe(`stateDiagram-v2
  [*] --> generating
  generating --> review: generated
  review --> publishing: approve [guard]
  review --> rejected: reject
  review --> expired: after:2d
  publishing --> published: published
  published --> [*]
  rejected --> [*]
  expired --> [*]
`);
    expect(machineGraph(wf)).toMatchObject({
      initial: 'generating',
      states: [{ name: 'generating', final: false }, { name: 'review' }, { name: 'publishing' }, { name: 'published', final: true }, { name: 'rejected' }, { name: 'expired' }],
    });
    expect(() => machineDiagram(publishing.length as never)).toThrow(InvalidArgumentError);
  });
});
