// The payload store: large values are stored once under their content's hash, compressed; a list
// that grows (an agent's transcript) stores only what is new; values read back exactly through
// every read (get, events, results, signals, approvals); blobs go with the last task that holds
// them; a value over its limit fails the step with a coded, non-retryable error; an encrypted store
// holds no plaintext; a database written without the payload store still opens and resumes.
import { readFileSync, readdirSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { workflow, aesGcmCodec, directoryBackend, s3Backend, type ApprovalInfo, type Engine } from '../src/index.ts';
import { openStore } from '../src/store-url.ts';
import { LAYERS } from '../src/payloads/layered-store.ts';
import type { BlobUsage } from '../src/store.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, tempDbUrl, tempDir, waitForStatus } from './support/engine.ts';
import { PG_URL } from './support/postgres.ts';
import pg from 'pg';
import OpenAI from 'openai';
import { chatCompletion } from '../src/ai/index.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';

/** Text that does not compress to nothing: words picked by a small LCG. */
function prose(seed: number, chars: number): string {
  const words = [
    'agent',
    'tool',
    'result',
    'latency',
    'invoice',
    'customer',
    'refund',
    'policy',
    'search',
    'answer',
    'draft',
    'review',
    'model',
    'token',
    'budget',
    'report',
    'quarter',
    'region',
    'growth',
    'churn',
  ];
  let x = seed * 2654435761 + 1;
  let s = '';
  while (s.length < chars) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += `${words[x % words.length]}${x % 7 === 0 ? `-${x % 1000}` : ''} `;
  }
  return s;
}
const message = (i: number) => ({ role: i % 2 ? 'assistant' : 'user', content: prose(i, 1000) });

/** A chat loop that checkpoints its whole transcript every turn (two ~1 KB messages a turn). */
const chat = workflow('chat', async (ctx, input: { turns: number }) => {
  let transcript: Array<{ role: string; content: string }> = [];
  for (let t = 0; t < input.turns; t++) transcript = await ctx.step('turn', () => [...transcript, message(2 * t), message(2 * t + 1)]);
  return transcript.length;
});

async function usage(url: string): Promise<BlobUsage> {
  const s = await openStore(url, {});
  try {
    return await s.blobUsage();
  } finally {
    await s.close();
  }
}

/** Every byte the store holds: the SQLite files, or every row of the PostgreSQL schema as text. */
async function everythingStored(url: string): Promise<string> {
  if (TEST_STORE === 'sqlite') {
    const path = url.slice('sqlite:'.length);
    const dir = path.slice(0, path.lastIndexOf('/'));
    return readdirSync(dir)
      .filter((f) => f.startsWith('stepwise.db'))
      .map((f) => readFileSync(`${dir}/${f}`).toString('latin1'))
      .join('');
  }
  const schema = new URL(url).searchParams.get('schema')!;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [schema]);
    let all = '';
    for (const t of tables) {
      const { rows } = await client.query<{ t: string | null }>(`SELECT string_agg(x::text, '') AS t FROM "${schema}"."${t.table_name}" x`);
      all += rows[0]?.t ?? '';
    }
    return all;
  } finally {
    await client.end();
  }
}

async function run(engine: Engine, wf: { name: string }, input: unknown): Promise<string> {
  const { id } = await engine.start(wf.name, input);
  await engine.result(id, { timeout: 60_000 });
  return id;
}

describe(`payload store (${TEST_STORE})`, () => {
  it('stores a growing transcript by what is new: bytes per turn stay flat, within 2x the distinct content', async () => {
    const sizes: Record<number, BlobUsage> = {};
    for (const turns of [30, 60]) {
      const url = tempDbUrl();
      const engine = makeEngine({ store: url, workflows: [chat] });
      await startWorker(engine);
      await run(engine, chat, { turns });
      sizes[turns] = await usage(url);
    }
    const distinct = (turns: number) => Array.from({ length: 2 * turns }, (_, i) => JSON.stringify(message(i)).length).reduce((a, b) => a + b, 0);
    // Quadratic storage would grow 4x from 30 to 60 turns; what is stored grows with the turns.
    expect(sizes[60]!.size / sizes[30]!.size).toBeLessThan(2.3);
    expect(sizes[60]!.size).toBeLessThanOrEqual(2 * distinct(60));
    // Compressed, it is well under the distinct content.
    expect(sizes[60]!.stored).toBeLessThan(distinct(60));
  });

  it('resumes a long transcript loading each recorded value as the replay reaches it, a few at a time', async () => {
    const TURNS = 30;
    const parked = workflow('parked-chat', async (ctx) => {
      let transcript: Array<{ role: string; content: string }> = [];
      for (let t = 0; t < TURNS; t++) transcript = await ctx.step('turn', () => [...transcript, message(2 * t), message(2 * t + 1)]);
      const ev = await ctx.waitForEvent<string>('more');
      return { turns: transcript.length, last: transcript.at(-1), more: ev.timedOut ? null : ev.payload };
    });
    const url = tempDbUrl();
    const first = makeEngine({ store: url, workflows: [parked] });
    await startWorker(first);
    const { id } = await first.start(parked);
    await waitForStatus(first, id, 'waiting');
    await first.close();
    // A fresh engine: its worker replays every turn from the store.
    const second = makeEngine({ store: url, workflows: [parked] });
    await startWorker(second);
    await second.signal(id, 'more', 'yes');
    expect(await second.result(id, { timeout: 30_000 })).toEqual({ turns: 2 * TURNS, last: message(2 * TURNS - 1), more: 'yes' });
    const loads = LAYERS.get(await second.ready())!.replayLoads;
    expect(loads.values).toBeGreaterThanOrEqual(TURNS - 1);
    expect(loads.most).toBeLessThanOrEqual(4);
  });

  it('reads every value back exactly: get, the result, the journal, the log, signals and approvals', async () => {
    const big = { doc: prose(7, 20_000), list: Array.from({ length: 40 }, (_, i) => message(i)) };
    const wf = workflow('roundtrip', async (ctx, input: typeof big) => {
      const copy = await ctx.step('copy', () => ({ ...input, note: 'copied' }));
      const ev = await ctx.waitForEvent<typeof big>('more');
      const decision = await ctx.approval('ok', { payload: input, approvers: ['ann'] });
      return { copy, more: ev.timedOut ? null : ev.payload, approved: decision.approved };
    });
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, big);
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'more', big);
    await eventually(async () => (await engine.approvals({ taskId: id })).length > 0);
    const [approval] = await engine.approvals({ taskId: id });
    expect(approval!.payload).toEqual(big);
    await engine.decide(approval!.id, { by: 'ann', approve: true } as never);
    const out = (await engine.result(id, { timeout: 30_000 })) as { copy: unknown; more: unknown; approved: boolean };
    expect(out).toEqual({ copy: { ...big, note: 'copied' }, more: big, approved: true });
    const info = await engine.get(id, { steps: true });
    expect(info.input).toEqual(big);
    expect(info.status === 'succeeded' && info.output).toEqual(out);
    expect(info.steps?.find((s) => s.name === 'copy')?.output).toEqual({ ...big, note: 'copied' });
    const log = [];
    for await (const e of engine.events({ taskId: id, follow: false })) log.push(e);
    const text = JSON.stringify(log);
    expect(text).not.toContain('\\u0000sw:');
    expect(text).toContain(big.doc.slice(0, 200));
    // The same big value in input, step output, signal and approval is one set of blobs.
    const u = await usage(url);
    expect(u.size).toBeLessThan(3 * JSON.stringify(big).length);
  });

  it('stores a value once across tasks, keeps it while any task holds it, and collects it after the last one is deleted', async () => {
    const doc = prose(3, 50_000);
    const wf = workflow('holder', async (ctx, input: { doc: string }) => ctx.step('echo', () => input.doc));
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf], payloads: { collectAfter: '1s' } });
    await startWorker(engine, { retentionSweepMs: 30 });
    const a = await run(engine, wf, { doc });
    const once = await usage(url);
    const b = await run(engine, wf, { doc });
    const twice = await usage(url);
    expect(twice.blobs).toBe(once.blobs);
    expect(twice.stored).toBe(once.stored);
    await engine.delete(a);
    // A collection pass with every blob past its grace period: b's hold keeps them.
    await LAYERS.get(await engine.ready())!.collect(Date.now() + 1, 1000);
    expect((await usage(url)).blobs).toBe(once.blobs);
    expect((await engine.get(b, { steps: true })).steps?.[0]?.output).toBe(doc);
    await engine.delete(b);
    await eventually(async () => (await usage(url)).blobs === 0, 10_000, 'blobs collected');
    expect((await usage(url)).holdings).toBe(0);
  });

  it('fails a step whose output is over the limit with PAYLOAD_TOO_LARGE naming the option, without retrying', async () => {
    const wf = workflow('huge', async (ctx) => ctx.step('make', () => prose(1, 40_000)), { retry: 3 });
    const engine = makeEngine({ workflows: [wf], limits: { outputBytes: 20_000 } });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id, { steps: true });
    const error = (info.status === 'failed' ? info.error : null) as unknown as { code: string; message: string; cause?: { code: string; message: string } };
    const cause = error.cause ?? error;
    expect(cause.code).toBe('PAYLOAD_TOO_LARGE');
    expect(cause.message).toContain('limits.outputBytes');
    expect(info.steps?.[0]?.attempts).toBe(1);
  });

  it('refuses a threshold below 256, an unknown option and a codec that is not one', () => {
    expect(() => makeEngine({ payloads: { threshold: 10 } })).toThrow(/threshold/);
    expect(() => makeEngine({ payloads: { treshold: 5000 } as never })).toThrow(/unknown option "treshold"/);
    expect(() => makeEngine({ codec: {} as never })).toThrow(/encode/);
    expect(() => aesGcmCodec({ keys: { k1: Buffer.alloc(16) }, current: 'k1' })).toThrow(/32/);
    expect(() => aesGcmCodec({ keys: { k1: Buffer.alloc(32) }, current: 'k2' })).toThrow(/not among keys/);
  });

  it('opens a database written without the payload store, resumes its tasks and reads the old values', async () => {
    const doc = prose(11, 30_000);
    const wf = workflow('resumes', async (ctx, input: { doc: string }) => {
      const first = await ctx.step('first', () => input.doc.toUpperCase());
      const ev = await ctx.waitForEvent<string>('go');
      return { first: first.length, second: await ctx.step('second', () => `${ev.timedOut ? '' : ev.payload}${input.doc}`) };
    });
    const url = tempDbUrl();
    const before = makeEngine({ store: url, workflows: [wf], payloads: false });
    await startWorker(before);
    const { id } = await before.start(wf, { doc });
    await waitForStatus(before, id, 'waiting');
    await before.close();
    expect((await usage(url)).blobs).toBe(0);
    const after = makeEngine({ store: url, workflows: [wf] });
    await startWorker(after);
    await after.signal(id, 'go', 'x');
    expect(await after.result(id, { timeout: 30_000 })).toEqual({ first: doc.length, second: `x${doc}` });
    expect((await after.get(id, { steps: true })).steps?.find((s) => s.name === 'first')?.output).toBe(doc.toUpperCase());
    expect((await usage(url)).blobs).toBeGreaterThan(0);
    await after.close();
    // Turned off again, the engine still reads what the payload store kept.
    const off = makeEngine({ store: url, workflows: [wf], payloads: false });
    expect((await off.get(id)).status === 'succeeded' && (await off.get(id, { steps: true })).steps?.find((s) => s.name === 'second')?.output).toBe(`x${doc}`);
  });

  it('hands back a string that looks like a reference as it was, also after a resume', async () => {
    const lookalike = '\u0000sw:r:zzzz';
    const wf = workflow('lookalike', async (ctx) => {
      const v = await ctx.step('make', () => lookalike);
      const ev = await ctx.waitForEvent<string>('go');
      return { v, more: ev.timedOut ? null : ev.payload };
    });
    const url = tempDbUrl();
    const first = makeEngine({ store: url, workflows: [wf] });
    await startWorker(first);
    const { id } = await first.start(wf);
    await waitForStatus(first, id, 'waiting');
    await first.close();
    const second = makeEngine({ store: url, workflows: [wf] });
    await startWorker(second);
    await second.signal(id, 'go', lookalike);
    expect(await second.result(id, { timeout: 30_000 })).toEqual({ v: lookalike, more: lookalike });
  });

  it("judges a decision on the whole payload of an approval kept in the payload store (a long error's ask)", async () => {
    const long = `upstream said: ${prose(3, 6000)}`;
    const wf = workflow('long-ask', async (ctx) =>
      ctx.step(
        'call',
        () => {
          throw new Error(long);
        },
        { retry: { maxAttempts: 1 }, onExhausted: 'ask', fallback: 'fallen back' },
      ),
    );
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    let approval: ApprovalInfo | undefined;
    await eventually(async () => (approval = (await engine.approvals({ taskId: id, status: 'pending' }))[0]) !== undefined, 15_000, 'the ask');
    expect(approval!.payload).toMatchObject({ actions: expect.arrayContaining(['skip']), error: { message: long } });
    expect((await usage(url)).blobs).toBeGreaterThan(0);
    await engine.decide(approval!.id, { approve: true, by: 'ops', data: { action: 'skip' } });
    expect(await engine.result(id, { timeout: 30_000 })).toBe('fallen back');
  });

  it("keeps a reviewer's data that spells a reference as the text it is, without a codec", async () => {
    const spelled = '\u0000sw:r:AAAA';
    const wf = workflow('spelled-review', async (ctx) => ctx.approval('check', { approvers: ['ops'] }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    const [a] = await engine.approvals({ taskId: id });
    await engine.decide(a!.id, { approve: true, by: 'ops', data: { note: spelled } });
    expect(await engine.result(id, { timeout: 30_000 })).toMatchObject({ approved: true, data: { note: spelled } });
    const info = await engine.get(id);
    expect(info.approvals[0]?.decisions[0]).toMatchObject({ data: { note: spelled } });
    expect(await engine.approvals({})).toHaveLength(1);
  });

  it('reads a title, a tag or a name that spells a reference as the text it is', async () => {
    // What a column holds in place of a value, spelled in plain text where no payload goes.
    const spelled = '"\\u0000sw:r:zzzz" and "\\u0000sw:e:AAAA"';
    const wf = workflow('spelled', async (ctx) => {
      await ctx.setTags({ note: spelled });
      return ctx.step('make', () => 1);
    });
    const engine = makeEngine({ store: tempDbUrl(), workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, {}, { title: spelled, tags: { from: spelled } });
    expect(await engine.result(id, { timeout: 30_000 })).toBe(1);
    const info = await engine.get(id);
    expect(info.title).toBe(spelled);
    expect(info.tags).toEqual({ from: spelled, note: spelled });
    const listed = await engine.list({ tags: { from: spelled } });
    expect(listed.tasks.map((t) => t.title)).toEqual([spelled]);
  });
});

describe(`payload codec and backends (${TEST_STORE})`, () => {
  const secret = 'PLAINTEXT-MARKER-7f3a';
  const sealedWf = workflow('sealed', async (ctx, input: { note: string; doc: string }) => {
    const small = await ctx.step('small', () => `${input.note}/step`);
    const big = await ctx.step('big', () => `${input.doc}/step`);
    const ev = await ctx.waitForEvent<{ note: string }>('more');
    return { small, big: big.length, more: ev.timedOut ? null : ev.payload };
  });

  it('encrypts every payload: the database holds no plaintext, and rotated keys still read old values', async () => {
    const k1 = Buffer.alloc(32, 1);
    const k2 = Buffer.alloc(32, 2);
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [sealedWf], codec: aesGcmCodec({ keys: { k1 }, current: 'k1' }) });
    await startWorker(engine);
    const { id } = await engine.start(sealedWf, { note: secret, doc: `${secret} ${prose(5, 10_000)}` });
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'more', { note: secret });
    const out = await engine.result(id, { timeout: 30_000 });
    expect(out).toEqual({ small: `${secret}/step`, big: secret.length + 1 + prose(5, 10_000).length + 5, more: { note: secret } });
    await engine.close();
    expect(await everythingStored(url)).not.toContain(secret);

    // Rotated: new values under k2, old ones still read with k1 kept.
    const rotated = makeEngine({ store: url, workflows: [sealedWf], codec: aesGcmCodec({ keys: { k1, k2 }, current: 'k2' }) });
    expect((await rotated.get(id)).input).toEqual({ note: secret, doc: `${secret} ${prose(5, 10_000)}` });
    await rotated.close();
    // Without the old key, reading fails with a coded error naming the key.
    const lost = makeEngine({ store: url, workflows: [sealedWf], codec: aesGcmCodec({ keys: { k2 }, current: 'k2' }) });
    await expect(lost.get(id)).rejects.toMatchObject({ code: 'PAYLOAD_UNREADABLE', message: expect.stringContaining('"k1"') });
    await lost.close();
  });

  it("seals a reviewer's data and comment, an idempotency record's result and a failure's message in the log too, and reads them back", async () => {
    const reviewed = workflow('reviewed', async (ctx) => {
      const first = await ctx.approval('check', { approvers: ['alice', 'bob'], quorum: 2, payload: { draft: 'short' } });
      const once = await ctx.step('charge', () => ({ receipt: `${secret}:receipt` }), { key: 'order-1' });
      return { first, once };
    });
    const url = tempDbUrl();
    const codec = aesGcmCodec({ keys: { k1: Buffer.alloc(32, 5) }, current: 'k1' });
    const broken = workflow('broken-secret', async (ctx) => ctx.step('call', () => Promise.reject(new Error(`${secret} rejected the key`)), { retry: { maxAttempts: 1 } }));
    const engine = makeEngine({ store: url, workflows: [reviewed, broken], codec });
    await startWorker(engine);
    const { id } = await engine.start(reviewed);
    await waitForStatus(engine, id, 'waiting');
    const [approval] = await engine.approvals({ taskId: id });
    // Two decisions: the first is recorded (decisions column, decision entry), the second settles it (outcome, decided entry).
    await engine.decide(approval!.id, { approve: true, by: 'alice', comment: `${secret} looks fine`, data: { note: `${secret}:alice` } });
    await engine.decide(approval!.id, { approve: true, by: 'bob', comment: `${secret} agreed`, data: { note: `${secret}:bob` } });
    const out = await engine.result(id, { timeout: 30_000 });
    expect(out).toMatchObject({ first: { approved: true, by: 'bob', comment: `${secret} agreed`, data: { note: `${secret}:bob` } }, once: { receipt: `${secret}:receipt` } });
    const record = await engine.idempotency.run(`${secret}-key`, () => ({ kept: `${secret}:kept` }));
    expect(await engine.idempotency.run(`${secret}-key`, () => ({ kept: 'again' }))).toEqual(record);
    const info = await engine.get(id);
    expect(info.approvals[0]?.decisions.map((d) => [d.by, d.comment, d.data])).toEqual([
      ['alice', `${secret} looks fine`, { note: `${secret}:alice` }],
      ['bob', `${secret} agreed`, { note: `${secret}:bob` }],
    ]);
    const decisions = info.history.filter((e) => e.type === 'approval:decision' || e.type === 'approval:decided');
    expect(decisions).toHaveLength(3);
    expect(JSON.stringify(decisions)).toContain(`${secret}:alice`);
    // A failure's message, in the error and in the log's account of the failure.
    const failed = await engine.start(broken);
    await waitForStatus(engine, failed.id, 'failed');
    const failure = (await engine.get(failed.id)).history.find((e) => e.type === 'transition' && e.event === 'fail');
    expect(JSON.stringify(failure)).toContain(`${secret} rejected the key`);
    await engine.close();
    // The key itself is the caller's name for the record, not a payload: only values are sealed.
    expect((await everythingStored(url)).replaceAll(`${secret}-key`, '')).not.toContain(secret);
  });

  it('encrypts the frames of a streaming model step too, and readers get them back', async () => {
    const fake = await startFakeOpenAI();
    try {
      const client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL });
      fake.script([{ kind: 'text', chunks: [`${secret} `, 'streamed'], usage: { prompt_tokens: 3, completion_tokens: 2 } }]);
      const streams = workflow('sealed-stream', async (ctx) => {
        const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
        return r.choices[0]?.message.content;
      });
      const url = tempDbUrl();
      const engine = makeEngine({ store: url, workflows: [streams], codec: aesGcmCodec({ keys: { k1: Buffer.alloc(32, 7) }, current: 'k1' }) });
      await startWorker(engine);
      const { id } = await engine.start(streams);
      expect(await engine.result(id, { timeout: 30_000 })).toBe(`${secret} streamed`);
      const frames: string[] = [];
      for await (const e of engine.events({ taskId: id, streams: true, follow: false })) if (e.type === 'stream:delta') frames.push(e.delta);
      expect(frames.join('')).toBe(`${secret} streamed`);
      expect(await everythingStored(url)).not.toContain(secret);
    } finally {
      await fake.close();
    }
  });

  it("stores a transactional step's output like any step's: sealed, in blobs the task holds (in the database, beside a backend), read back after a resume", async () => {
    const dir = tempDir();
    const doc = `${secret} ${prose(11, 30_000)}`;
    let runs = 0;
    const txWf = workflow('tx-payload', async (ctx, input: { n: number }) => {
      const got = await ctx.transaction('read', async (tx) => {
        runs++;
        const [row] = await tx.query<{ one: number }>('SELECT 1 AS one');
        return { one: Number(row?.one), doc, note: `${secret}:${input.n}` };
      });
      await ctx.sleep('pause', '1ms');
      const again = await ctx.waitForEvent<{ go: boolean }>('go');
      return { one: got.one, size: got.doc.length, note: got.note, go: !again.timedOut };
    });
    const url = tempDbUrl();
    const options = {
      store: url,
      workflows: [txWf],
      codec: aesGcmCodec({ keys: { k1: Buffer.alloc(32, 3) }, current: 'k1' }),
      payloads: { backend: directoryBackend(dir), collectAfter: '1s' },
    } as const;
    const first = makeEngine(options);
    const w1 = await startWorker(first);
    const { id } = await first.start(txWf, { n: 1 });
    await waitForStatus(first, id, 'waiting');
    await w1.stop();
    await first.close();
    // Replayed by another engine: the recorded result is read back from the backend, not run again.
    const second = makeEngine(options);
    await startWorker(second, { retentionSweepMs: 30 });
    await second.signal(id, 'go', { go: true });
    expect(await second.result(id, { timeout: 30_000 })).toEqual({ one: 1, size: doc.length, note: `${secret}:1`, go: true });
    expect(runs).toBe(1);
    const step = (await second.get(id)).steps.find((x) => x.name === 'read');
    expect(step?.output).toEqual({ one: 1, doc, note: `${secret}:1` });
    // Written in the step's transaction, the bytes stay in the database: no backend I/O holds its lock.
    expect(readdirSync(dir)).toEqual([]);
    expect((await usage(url)).blobs).toBeGreaterThan(0);
    expect(await everythingStored(url)).not.toContain(secret);
    await second.delete(id);
    await eventually(async () => (await usage(url)).blobs === 0, 30_000, 'the blobs collected with the task');
  });

  it('keeps blob bytes in a directory: rows hold no bytes, reads are exact, and collection deletes the files', async () => {
    const dir = tempDir();
    const doc = prose(9, 40_000);
    const wf = workflow('ondisk', async (ctx, input: { doc: string }) => ctx.step('echo', () => `${input.doc}!`));
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf], payloads: { backend: directoryBackend(dir), collectAfter: '1s' } });
    await startWorker(engine, { retentionSweepMs: 30 });
    // Files that are not blobs, in the same directory, are left alone by collection.
    mkdirSync(join(dir, 'ab'), { recursive: true });
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    writeFileSync(join(dir, 'ab', 'readme.md'), 'mine');
    const id = await run(engine, wf, { doc });
    expect(await engine.result(id)).toBe(`${doc}!`);
    expect((await engine.get(id)).input).toEqual({ doc });
    const files = () => readdirSync(dir).flatMap((d) => (statSync(`${dir}/${d}`).isDirectory() ? readdirSync(`${dir}/${d}`).filter((n) => n !== 'readme.md') : []));
    expect(files().length).toBeGreaterThan(0);
    const u = await usage(url);
    expect(u.blobs).toBe(files().length);
    expect(await everythingStored(url)).not.toContain(doc.slice(0, 100));
    await engine.delete(id);
    await eventually(() => files().length === 0, 10_000, 'files deleted');
    // A collection pass with every file old enough, the backend's sweep included.
    await LAYERS.get(await engine.ready())!.collect(Date.now() + 1, 1000);
    expect(existsSync(join(dir, 'notes.txt')) && existsSync(join(dir, 'ab', 'readme.md'))).toBe(true);
  });
});

describe(`payload store on S3-compatible storage (${TEST_STORE})`, () => {
  it('keeps blob bytes as objects of a bucket (a local S3 server): reads are exact, and collection deletes the objects', async () => {
    const { default: S3rver } = await import('s3rver');
    const { S3Client, ListObjectsV2Command } = await import('@aws-sdk/client-s3');
    const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir(), configureBuckets: [{ name: 'blobs', configs: [] }] });
    const { port } = (await server.run()) as { port: number };
    const client = new S3Client({ region: 'us-east-1', endpoint: `http://127.0.0.1:${port}`, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    try {
      const doc = prose(13, 40_000);
      const wf = workflow('ons3', async (ctx, input: { doc: string }) => ctx.step('echo', () => `${input.doc}?`));
      const url = tempDbUrl();
      const engine = makeEngine({ store: url, workflows: [wf], payloads: { backend: s3Backend({ client, bucket: 'blobs', prefix: 'sw/' }), collectAfter: '2s' } });
      await startWorker(engine, { retentionSweepMs: 30 });
      const id = await run(engine, wf, { doc });
      expect(await engine.result(id)).toBe(`${doc}?`);
      expect((await engine.get(id)).input).toEqual({ doc });
      const objects = async (): Promise<string[]> => ((await client.send(new ListObjectsV2Command({ Bucket: 'blobs', Prefix: 'sw/' }))).Contents ?? []).map((o) => o.Key!);
      expect((await objects()).length).toBe((await usage(url)).blobs);
      expect(await everythingStored(url)).not.toContain(doc.slice(0, 100));
      await engine.delete(id);
      await eventually(async () => (await objects()).length === 0, 15_000, 'objects deleted');
    } finally {
      client.destroy();
      await server.close();
    }
  });
});
