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
