// Issue 27: what a caller can make the server hold or refuse — batch keys, request nits
// (percent-encoding, deep JSON, payload at the documented limit).
import { describe, expect, it } from 'vitest';
import { workflow, type TaskSummary } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { IdempotencyCache } from '../src/server/idempotency.ts';
import { ManualClock } from '../src/testing/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { preview, summarizeTask } from '../src/server/summaries.ts';
import { call, TOKENS } from './support/server.ts';

const echo = workflow('echo', async (ctx, input: unknown) => ctx.step('say', () => ({ said: input })));

function setup(options: Partial<Parameters<typeof createServer>[1]> = {}) {
  const engine = makeEngine({ workflows: [echo] });
  const server = createServer(engine, { tokens: TOKENS, ...options });
  return { engine, server };
}

describe('HTTP batch starts: derived item keys', () => {
  it('starts every item of a batch sent with a 255-character Idempotency-Key, and a retry creates nothing twice', async () => {
    const { server } = setup();
    const key = 'k'.repeat(255);
    const batch = {
      tasks: [
        { workflow: 'echo', input: 1 },
        { workflow: 'echo', input: 2 },
      ],
    };
    const res = await call(server, 'POST', '/api/tasks/batch', { body: batch, headers: { 'idempotency-key': key } });
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: { task?: { created: boolean } }) => r.task?.created)).toEqual([true, true]);
    const again = await call(server, 'POST', '/api/tasks/batch', { body: batch, headers: { 'idempotency-key': key } });
    expect(again.body.results.map((r: { task: { id: string } }) => r.task.id)).toEqual(res.body.results.map((r: { task: { id: string } }) => r.task.id));
  });

  it("never gives an item without a key a derived key equal to another item's own key", async () => {
    const { server } = setup();
    // `<key>:<index>` would give item 0 the key "b:0", which item 1 names as its own.
    const batch = {
      tasks: [
        { workflow: 'echo', input: 'first' },
        { workflow: 'echo', input: 'second', idempotencyKey: 'b:0' },
      ],
    };
    const res = await call(server, 'POST', '/api/tasks/batch', { body: batch, headers: { 'idempotency-key': 'b' } });
    expect(res.status).toBe(200);
    const [a, b] = res.body.results as Array<{ task?: { id: string; created: boolean } }>;
    expect(a?.task?.created).toBe(true);
    expect(b?.task?.created).toBe(true);
    expect(a?.task?.id).not.toBe(b?.task?.id);
  });
});

describe('HTTP requests: encodings, depth and sizes', () => {
  const waiter = workflow('waiter', async (ctx) => ctx.waitForEvent('go'));

  it('refuses a signal name with invalid percent-encoding (INVALID_ARGUMENT) instead of storing it literally', async () => {
    const { server } = setup();
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 1 } });
    const res = await call(server, 'POST', `/api/tasks/${t.id}/signals/%E0%A4%A`, { body: { payload: 1 } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_ARGUMENT');
    expect(res.body.error.message).toContain('percent-encoding');
    // A well-formed encoding still arrives decoded.
    const ok = await call(server, 'POST', `/api/tasks/${t.id}/signals/${encodeURIComponent('नमस्ते')}`, { body: { payload: 1 } });
    expect(ok.status).toBe(202);
  });

  it('refuses a very deep JSON body with INVALID_ARGUMENT naming the depth limit', async () => {
    const { server } = setup();
    const deep = `{"workflow":"echo","input":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const res = await call(server, 'POST', '/api/tasks', { raw: deep });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', maxDepth: 512 });
    expect(res.body.error.message).toContain('512');
    // Brackets inside strings do not count, and a value at the limit passes.
    const text = `{"workflow":"echo","input":{"s":"${'['.repeat(2000)}","v":${'['.repeat(510)}${']'.repeat(510)}}}`;
    expect((await call(server, 'POST', '/api/tasks', { raw: text })).status).toBe(201);
  });

  it('takes a signal payload of exactly the configured limit with its envelope, and refuses one byte more as PAYLOAD_TOO_LARGE', async () => {
    const engine = makeEngine({ workflows: [waiter], limits: { payloadBytes: 1024 * 1024 } });
    const server = createServer(engine, { tokens: TOKENS });
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'waiter' } });
    const payload = 'x'.repeat(1024 * 1024 - 2); // its JSON (with the quotes) is 1 MiB
    const res = await call(server, 'POST', `/api/tasks/${t.id}/signals/go`, { body: { payload, idempotencyKey: 'k'.repeat(255) } });
    expect(res.status).toBe(202);
    const over = await call(server, 'POST', `/api/tasks/${t.id}/signals/go`, { body: { payload: `${payload}x` } });
    expect(over.status).toBe(413);
    expect(over.body.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limitBytes: 1024 * 1024 });
  });
});

describe('HTTP lists and replays: bounded in bytes', () => {
  const big = (n: number, c = 'x') => ({ blob: c.repeat(n) });

  it('lists summaries: a large input is cut to its first bytes, named in `truncated`, with the url of the whole task', async () => {
    const { engine, server } = setup();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await engine.start('echo', big(900 * 1024, String(i)))).id);
    const small = (await engine.start('echo', { n: 1 })).id;
    const res = await server.app.request('http://localhost/api/tasks?limit=1000', { headers: { authorization: `Bearer ${TOKENS[0]?.token}` } });
    const text = await res.text();
    // Five 900 KB inputs, and the body is a few KiB per task.
    expect(Buffer.byteLength(text)).toBeLessThan(6 * 6 * 1024);
    const page = JSON.parse(text) as { tasks: Array<{ id: string; input: unknown; truncated: string[]; url: string }>; nextCursor: string | null };
    expect(page.tasks.map((t) => t.id)).toEqual([small, ...ids.reverse()]);
    expect(page.tasks[0]).toMatchObject({ input: { n: 1 }, truncated: [], url: `/api/tasks/${small}` });
    for (const t of page.tasks.slice(1)) {
      expect(t.truncated).toEqual(['input']);
      expect(typeof t.input).toBe('string');
      expect(Buffer.byteLength(t.input as string)).toBeLessThanOrEqual(4096);
      expect(t.input as string).toMatch(/^\{"blob":"(\d)\1+…$/);
    }
    // The task's own URL has the whole value.
    const whole = await call(server, 'GET', (page.tasks[1] as { url: string }).url, { as: 'vera' });
    expect(whole.body.input).toEqual(big(900 * 1024, '4'));
    expect(page.nextCursor).toBeNull();
  });

  it('stops a page early with a cursor when its body reaches maxResponseBytes, and the cursors walk every task once', async () => {
    const { engine, server } = setup({ maxResponseBytes: 64 * 1024, summaryValueBytes: 4096 });
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await engine.start('echo', big(10_000))).id);
    const seen: string[] = [];
    let cursor: string | null = '';
    let pages = 0;
    while (cursor !== null) {
      const res = await server.app.request(`http://localhost/api/tasks?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${TOKENS[0]?.token}` } });
      const text = await res.text();
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(64 * 1024);
      const page = JSON.parse(text) as { tasks: Array<{ id: string }>; nextCursor: string | null; limitedBy?: string };
      if (page.nextCursor !== null) expect(page.limitedBy).toBe('bytes');
      seen.push(...page.tasks.map((t) => t.id));
      cursor = page.nextCursor;
      pages++;
    }
    expect(pages).toBeGreaterThan(2);
    expect(seen).toEqual([...ids].reverse());
  });

  it('answers a command with the summary of the task, so a replayed answer stays small whatever the task holds', async () => {
    const { engine, server } = setup();
    const { id } = await engine.start('echo', big(900 * 1024));
    const res = await server.app.request(`http://localhost/api/tasks/${id}/pause`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS[1]?.token}`, 'idempotency-key': 'p-1' },
    });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(Buffer.byteLength(text)).toBeLessThan(8 * 1024);
    expect(JSON.parse(text)).toMatchObject({ id, status: 'paused', truncated: ['input'], url: `/api/tasks/${id}` });
    const replay = await call(server, 'POST', `/api/tasks/${id}/pause`, { as: 'oscar', headers: { 'idempotency-key': 'p-1' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(JSON.parse(text));
  });
});

describe('idempotency cache', () => {
  const answer = (n: number) => async () => ({ status: 200, body: { blob: 'x'.repeat(n) } });

  it('counts the bytes of the answers it keeps and drops the oldest past maxBytes', async () => {
    const cache = new IdempotencyCache(new ManualClock(), { maxBytes: 100_000 });
    for (let i = 0; i < 600; i++) await cache.once('s', `k-${i}`, {}, answer(10_000));
    expect(cache.bytes).toBeLessThanOrEqual(100_000);
    expect(cache.bytes).toBeGreaterThan(80_000);
    expect(cache.size).toBeLessThanOrEqual(10);
    // The newest answer is replayed; the oldest was dropped (its retry runs again).
    expect((await cache.once('s', 'k-599', {}, answer(1))).replayed).toBe(true);
    expect((await cache.once('s', 'k-0', {}, answer(1))).replayed).toBe(false);
  });

  it('keeps no answer larger than maxBytes alone, and gives back the bytes of expired and failed ones', async () => {
    const clock = new ManualClock();
    const cache = new IdempotencyCache(clock, { maxBytes: 50_000, ttlMs: 60_000 });
    await cache.once('s', 'huge', {}, answer(60_000));
    expect(cache.bytes).toBe(0);
    expect((await cache.once('s', 'huge', {}, answer(1))).replayed).toBe(false);
    await cache.once('s', 'a', {}, answer(1000));
    const kept = cache.bytes;
    expect(kept).toBeGreaterThan(1000);
    await cache.once('s', 'b', {}, async () => ({ status: 409, body: { error: 'x'.repeat(5000) } }));
    expect(cache.bytes).toBe(kept);
    await clock.advance(60_000);
    await cache.once('s', 'c', {}, answer(10));
    expect(cache.size).toBe(1);
    expect(cache.bytes).toBeLessThan(kept);
  });

  it('is bounded in bytes by the idempotencyCacheBytes server option', async () => {
    expect(() => setup({ idempotencyCacheBytes: 0 })).toThrow(/idempotencyCacheBytes must be a whole number/);
    expect(() => setup({ maxResponseBytes: 10 })).toThrow(/maxResponseBytes must be a whole number ≥ 1024/);
  });
});

describe('HTTP approvals list and task summaries: large values cut', () => {
  it('lists approvals with a large payload cut to its first bytes, named in `truncated`, the task url having it whole', async () => {
    const asks = workflow('asks', async (ctx, n: number) => ctx.approval('publish', { payload: { draft: 'd'.repeat(n) }, approvers: ['alice'] }));
    const engine = makeEngine({ workflows: [asks] });
    const server = createServer(engine, { tokens: TOKENS });
    await startWorker(engine);
    const big = await engine.start('asks', 500_000);
    const small = await engine.start('asks', 10);
    await waitForStatus(engine, big.id, 'waiting');
    await waitForStatus(engine, small.id, 'waiting');
    const res = await server.app.request('http://localhost/api/approvals?limit=1000', { headers: { authorization: `Bearer ${TOKENS[0]?.token}` } });
    const text = await res.text();
    expect(Buffer.byteLength(text)).toBeLessThan(16 * 1024);
    const byTask = new Map((JSON.parse(text) as { approvals: Array<{ taskId: string; payload: unknown; truncated: string[]; url: string }> }).approvals.map((a) => [a.taskId, a]));
    expect(byTask.get(small.id)).toMatchObject({ payload: { draft: 'dddddddddd' }, truncated: [] });
    expect(byTask.get(big.id)).toMatchObject({ truncated: ['payload'], url: `/api/tasks/${big.id}` });
    expect(byTask.get(big.id)?.payload as string).toMatch(/^\{"draft":"d+…$/);
    const whole = await call(server, 'GET', `/api/tasks/${big.id}`, { as: 'vera' });
    expect(whole.body.approvals[0].payload).toEqual({ draft: 'd'.repeat(500_000) });
  });

  it('keeps the usage totals of a task in its summary and cuts only a large per-step usage', () => {
    const totals = { inputTokens: 1, outputTokens: 2, totalTokens: 3, costUsd: 0.01, attempts: 1 };
    const steps = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`step-${i}`, totals]));
    const task = { id: 'T1', status: 'running', input: 1, usage: { total: totals, steps } } as unknown as TaskSummary;
    const { item, bytes } = summarizeTask(task, 4096);
    expect(item.truncated).toEqual(['usage.steps']);
    expect(item.usage).toMatchObject({ total: totals });
    expect(typeof (item.usage as { steps: unknown }).steps).toBe('string');
    expect(bytes).toBeLessThan(5000);
    expect(preview('"ééééé"', 8)).toBe('"éé…');
    expect(preview(JSON.stringify('😀😀😀'), 9)).toBe('"😀…');
  });
});
