// engine.ready() asks the store each time once it is open, so that /healthz (which calls it)
// turns 503 when the engine is closed, its store was closed, or the database stops answering.
import { afterAll, describe, expect, it } from 'vitest';
import { Engine, isStepwiseError, workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { openStore } from '../src/store-url.ts';
import { makeEngine, tempDbUrl } from './support/engine.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { call, TOKENS } from './support/server.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const echo = workflow('echo', async (ctx, input: unknown) => ctx.step('say', () => input));

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return isStepwiseError(e) ? e.code : `uncoded: ${String(e)}`;
  }
}

describe('engine.ready()', () => {
  it('rejects with CLOSED once the engine is closed, and /healthz answers 503', async () => {
    const engine = makeEngine({ workflows: [echo] });
    const server = createServer(engine, { tokens: TOKENS });
    expect((await call(server, 'GET', '/healthz', { as: null })).status).toBe(200);
    await engine.close();
    expect(await codeOf(engine.ready())).toBe('CLOSED');
    expect((await call(server, 'GET', '/healthz', { as: null })).status).toBe(503);
  });

  it('rejects with a coded error once the store it was given is closed, and /healthz answers 503', async () => {
    const store = await openStore(tempDbUrl());
    const engine = new Engine({ store, workflows: [echo] });
    try {
      const server = createServer(engine, { tokens: TOKENS });
      await engine.ready();
      expect((await call(server, 'GET', '/healthz', { as: null })).status).toBe(200);
      await store.close();
      expect(await codeOf(engine.ready())).toBe('CLOSED');
      const health = await call(server, 'GET', '/healthz', { as: null });
      expect(health.status).toBe(503);
      expect(health.body.ok).toBe(false);
    } finally {
      await engine.close();
    }
  });
});

const schema = freshSchemaName('sw_ready');
afterAll(async () => {
  if (await hasPostgres()) await dropSchema(schema);
});

describe.skipIf(!(await hasPostgres()))('engine.ready() on PostgreSQL', () => {
  it('rejects with STORE_UNAVAILABLE while the database is unreachable, and answers again once it is back', async () => {
    const proxy = await startTcpProxy(Number(new URL(PG_URL).port || 5432));
    const u = new URL(PG_URL);
    u.port = String(proxy.port);
    u.searchParams.set('schema', schema);
    u.searchParams.set('connectTimeoutMs', '1000');
    u.searchParams.set('statementTimeoutMs', '1000');
    const engine = new Engine({ store: u.toString(), workflows: [echo] });
    try {
      await engine.ready();
      proxy.cut();
      expect(await codeOf(engine.ready())).toBe('STORE_UNAVAILABLE');
      // Packets dropped without a word: the probe's own deadline answers.
      proxy.restore();
      await engine.ready();
      proxy.blackhole();
      expect(await codeOf(engine.ready())).toBe('STORE_UNAVAILABLE');
      proxy.restore();
      await expect(engine.ready()).resolves.toBeDefined();
    } finally {
      proxy.restore();
      await engine.close();
      await proxy.close();
    }
  }, 30_000);
});
