// Wake-ups on PostgreSQL cost one NOTIFY per batch, and none when nobody listens: observed by a
// plain LISTEN connection of the test on the store's channels (its application_name is not a
// Stepwise listener's, so it does not count as one). What it hears is read up to a marker the test
// sends last: notifications arrive in commit order, so the marker comes after everything before it.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, openStore, workflow, type Store } from '../src/index.ts';
import type { WakeEvent, WriteOp } from '../src/store.ts';
import type { PostgresStore } from '../src/postgres/index.ts';
import { PG_URL, hasPostgres, sql } from './support/postgres.ts';
import { eventually, schemasOfThisFile } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const available = await hasPostgres();
if (!available && process.env.CI === 'true') throw new Error(`PostgreSQL is required in CI (${PG_URL})`);
if (!available) console.warn(`PostgreSQL not reachable at ${PG_URL}: postgres.notify tests skipped`);
const schema = schemasOfThisFile('sw_notify');

const three = workflow('three', async (ctx, input: number) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  return input;
});

/** The same, for the test of finished tasks (the tasks of the other tests are left alone). */
const finishing = workflow('finishing', async (ctx, input: number) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  return input;
});

/** The same, for the test of the echo (the tasks of the other tests are left alone). */
const echoed = workflow('echoed', async (ctx, input: number) => {
  await ctx.step('a', () => 1);
  return input;
});

/** A plain LISTEN connection on the channels, collecting what arrives. */
class Ear {
  readonly heard: Array<{ channel: string; payload: WakeEvent & { taskIds?: string[] } }> = [];
  readonly #client = new pg.Client({ connectionString: PG_URL, application_name: 'notify-test-ear' });
  #marks = 0;
  async open(channels: string[]): Promise<void> {
    await this.#client.connect();
    this.#client.on('notification', (m) => this.heard.push({ channel: m.channel, payload: JSON.parse(m.payload ?? 'null') as WakeEvent }));
    for (const c of channels) await this.#client.query(`LISTEN "${c}"`);
  }
  /** Everything committed before this call has arrived once it returns; the marker is left out. */
  async upToNow(channel: string): Promise<Ear['heard']> {
    const mark = `mark-${++this.#marks}`;
    await this.#client.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ reason: 'task', taskId: mark })]);
    await eventually(() => this.heard.some((h) => h.payload.taskId === mark), 10_000, 'the marker');
    return this.heard.splice(0).filter((h) => !h.payload.taskId.startsWith('mark-'));
  }
  close(): Promise<void> {
    return this.#client.end();
  }
}

describe.skipIf(!available)('NOTIFY per batch (PostgreSQL)', () => {
  let ear: Ear;
  let url: string;
  let channels: { wake: string; done: string };
  beforeAll(async () => {
    url = `${PG_URL}?schema=${schema()}`;
    const store = (await openStore(url)) as PostgresStore;
    await store.migrate();
    channels = { wake: store.channel, done: store.settledChannel };
    await store.close();
    ear = new Ear();
    await ear.open([channels.wake, channels.done]);
  });
  afterAll(async () => ear?.close());

  it('sends no NOTIFY when no Stepwise process listens on the channel', async () => {
    // An engine that does not subscribe (its store's subscribe is replaced), alone on the schema.
    const store = await openStore(url);
    const quiet = new Engine({ store: spyStore(store, { subscribe: () => async () => null }), workflows: [three] });
    try {
      await Promise.all(Array.from({ length: 20 }, (_, i) => quiet.start(three, i)));
      expect(await ear.upToNow(channels.wake)).toEqual([]);
    } finally {
      await quiet.close();
      await store.close();
    }
  });

  it('concurrent starts announce their batch once, to the processes that listen', async () => {
    const listener = await openStore(url);
    const off = await (listener.subscribe as NonNullable<Store['subscribe']>)(() => undefined, 'work');
    const store = await openStore(url);
    const engine = new Engine({ store, workflows: [three] });
    try {
      await engine.ready();
      await ear.upToNow(channels.wake);
      const handles = await Promise.all(Array.from({ length: 50 }, (_, i) => engine.start(three, i)));
      expect(handles).toHaveLength(50);
      expect((await ear.upToNow(channels.wake)).map((h) => h.payload)).toEqual([{ reason: 'task', taskId: '*', workflow: 'three', origin: expect.any(String) }]);
    } finally {
      await engine.close();
      await store.close();
      await off?.();
      await listener.close();
    }
  });

  it("an engine's workers are woken by its starts once: the echo of their announcement is ignored", async () => {
    const inner = await openStore(url);
    let claims = 0;
    let nextRuns = 0;
    const heard: WakeEvent[] = [];
    const store = spyStore(inner, {
      claim: (original) => async (request) => {
        claims++;
        return original(request);
      },
      nextRunAt: (original) => async (request) => {
        nextRuns++;
        return original(request);
      },
      subscribe: (original) => async (listener, topic) =>
        original((e) => {
          if (topic !== 'settled') heard.push(e);
          listener(e);
        }, topic),
    });
    const engine = new Engine({ store, workflows: [echoed] });
    try {
      const worker = engine.worker({ concurrency: 64, pollIntervalMs: 3_600_000 });
      await worker.start();
      // Its first look for work is over: it sleeps until something wakes it.
      await eventually(() => nextRuns > 0, 10_000, 'the first claim');
      claims = 0;
      const handles = await Promise.all(Array.from({ length: 20 }, (_, i) => engine.start(echoed, i)));
      expect(await Promise.all(handles.map((h) => h.result({ timeout: '20s' })))).toEqual(handles.map((_, i) => i));
      // Notifications arrive in commit order: once this marker is heard, the starts' echo was too.
      await sql(`SELECT pg_notify($1, $2)`, [channels.wake, JSON.stringify({ reason: 'task', taskId: 'marker', workflow: 'nobody-serves-this' })]);
      await eventually(() => heard.some((e) => e.taskId === 'marker'), 10_000, 'the marker');
      expect(heard.filter((e) => e.taskId === '*' && e.workflow === 'echoed')).toHaveLength(1);
      // One claim took the batch, woken in-process; the echo woke nobody.
      expect(claims).toBe(1);
      await worker.stop();
    } finally {
      await engine.close();
      await store.close();
      await ear.upToNow(channels.done); // what this test's tasks announced is not the next test's
    }
  });

  it('finished tasks are announced once per batch of end-of-run writes, every task in one of them', async () => {
    const inner = await openStore(url);
    // The worker's writes that finish tasks: one notification is expected per such write.
    let writes = 0;
    const finishes = (ops: readonly WriteOp[]): boolean => ops.some((op) => op.kind === 'transition' && op.notify?.reason === 'settled');
    const store = spyStore(inner, {
      writeBatch: (original) => async (ops) => {
        const r = await original(ops);
        if (finishes(ops)) writes++;
        return r;
      },
      writeBatchNow: (original) => (ops) => {
        const r = original(ops);
        if (finishes(ops)) writes++;
        return r;
      },
    });
    const engine = new Engine({ store, workflows: [finishing] });
    try {
      const handles = await engine.startMany(Array.from({ length: 60 }, (_, i) => ({ workflow: finishing, input: i })));
      const results = Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
      const worker = engine.worker({ concurrency: 64, pollIntervalMs: 20 });
      await worker.start();
      expect(await results).toEqual(handles.map((_, i) => i));
      await worker.stop();
      const heard = (await ear.upToNow(channels.done)).filter((h) => h.channel === channels.done).map((h) => h.payload);
      const ids = heard.flatMap((p) => p.taskIds ?? [p.taskId]);
      expect(ids.sort()).toEqual(handles.map((h) => h.id).sort());
      expect(heard).toHaveLength(writes);
    } finally {
      await engine.close();
      await store.close();
    }
  });

  it('a process waiting for many results holds one subscription to finished tasks, however many calls wait', async () => {
    const inner = await openStore(url);
    const topics: string[] = [];
    const store = spyStore(inner, {
      subscribe: (original) => async (listener, topic) => {
        topics.push(topic ?? 'work');
        return original(listener, topic);
      },
    });
    const waiting = workflow('waiting', async (ctx, n: number) => ctx.step('one', () => n));
    const engine = new Engine({ store, workflows: [waiting] });
    try {
      const handles = await engine.startMany(Array.from({ length: 300 }, (_, i) => ({ workflow: waiting, input: i })));
      const results = Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
      const worker = engine.worker({ concurrency: 128, pollIntervalMs: 20 });
      await worker.start();
      expect(await results).toEqual(handles.map((_, i) => i));
      await worker.stop();
      expect(topics.filter((t) => t === 'settled')).toEqual(['settled']);
    } finally {
      await engine.close();
      await store.close();
    }
  });
});
