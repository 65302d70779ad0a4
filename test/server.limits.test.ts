// Issue 27: what a caller can make the server hold or refuse — batch keys, request nits
// (percent-encoding, deep JSON, payload at the documented limit).
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine } from './support/engine.ts';
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

  it('takes a signal payload of exactly the documented 1 MiB with its envelope, and refuses one byte more as PAYLOAD_TOO_LARGE', async () => {
    const engine = makeEngine({ workflows: [waiter] });
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
