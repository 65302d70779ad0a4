// A short PostgreSQL blip (3 s) in the shapes a real outage has, under a worker using the default
// deadlines (a 30 s statement timeout, 32 s on the client): once the database is back, new work
// proceeds within seconds, not after the statement deadline. The bounds below are generous (half
// the deadline) so that a busy machine does not fail them; before the half-open watchdog the
// severed shape waited the full deadline.
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Engine, workflow, type Worker } from '../src/index.ts';
import { triple } from './fixtures/crash-workflows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const schema = freshSchemaName('sw_blip');
afterAll(async () => dropSchema(schema));

function throughProxy(port: number): string {
  const u = new URL(PG_URL);
  u.port = String(port);
  u.searchParams.set('schema', schema);
  return u.toString();
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs a worker through a proxy, warms its connections with a few tasks, applies `blip`, then
 * starts a task from another engine and waits for it with `timeout`.
 */
async function recoversFrom(blip: (proxy: TcpProxy) => Promise<void>, worker: { pollIntervalMs: number }, timeout: string): Promise<void> {
  const proxy = await startTcpProxy(Number(new URL(PG_URL).port || 5432));
  const direct = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [triple] });
  const behind = new Engine({ store: throughProxy(proxy.port), workflows: [triple] });
  let w: Worker | undefined;
  try {
    await direct.ready();
    w = behind.worker({ pollIntervalMs: worker.pollIntervalMs, heartbeatMs: 300, leaseMs: 20_000, concurrency: 4 });
    await w.start();
    const warm = await Promise.all([1, 2, 3, 4].map((n) => direct.start(triple, { n })));
    for (const t of warm) await direct.result(t.id, { timeout: '30s' });
    await blip(proxy);
    const next = await direct.start(triple, { n: 10 });
    expect(await direct.result(next.id, { timeout })).toBe(33);
    expect((await direct.get(next.id)).runs).toBe(1);
  } finally {
    proxy.restore();
    await w?.stop({ graceMs: 500 });
    await behind.close();
    await direct.close();
    await proxy.close();
  }
}

describe.skipIf(!(await hasPostgres()))('PostgreSQL blip of 3 s', () => {
  it('every connection reset and new ones refused: new work runs soon after the database is back', async () => {
    await recoversFrom(
      async (proxy) => {
        proxy.cut();
        await sleep(3000);
        proxy.restore();
      },
      { pollIntervalMs: 200 },
      '15s',
    );
  }, 90_000);

  it('old connections severed half-open (silent forever), new ones accepted after 3 s: new work runs soon after', async () => {
    await recoversFrom(
      async (proxy) => {
        proxy.sever();
        await sleep(3000);
        proxy.restore();
      },
      { pollIntervalMs: 200 },
      '15s',
    );
  }, 90_000);

  it('old connections severed half-open: a worker that only listens (no polling) hears new work again', async () => {
    // The LISTEN connection's ping goes unanswered; it is found orphaned and reopened.
    await recoversFrom(
      async (proxy) => {
        proxy.sever();
        await sleep(3000);
        proxy.restore();
      },
      { pollIntervalMs: 3_600_000 },
      '25s',
    );
  }, 90_000);

  it('a slow statement whose backend is alive is left alone by the check for orphaned connections', async () => {
    // pg_sleep(3) is unanswered for longer than the watchdog's suspicion: it asks the database,
    // finds the backend alive, and the statement finishes on its connection.
    const slow = workflow('slow-statement', async (ctx) => ctx.transaction('sleep', async (tx) => (await tx.query<{ ok: number }>('SELECT 1 AS ok FROM pg_sleep(3)'))[0]?.ok));
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [slow] });
    try {
      const w = engine.worker({ pollIntervalMs: 200 });
      await w.start();
      const { id } = await engine.start(slow);
      expect(await engine.result(id, { timeout: '30s' })).toBe(1);
      const info = await engine.get(id);
      expect(info.runs).toBe(1);
      expect(info.steps[0]).toMatchObject({ name: 'sleep', status: 'completed', attempts: 1 });
      await w.stop();
    } finally {
      await engine.close();
    }
  }, 60_000);

  it("PostgreSQL terminating the worker's backends: new work runs soon after", async () => {
    await recoversFrom(
      async (proxy) => {
        // Only this worker's connections: the backends whose client port is one of the proxy's.
        const admin = new pg.Client({ connectionString: PG_URL });
        await admin.connect();
        try {
          const ports = proxy.upstreamPorts();
          expect(ports.length).toBeGreaterThan(0);
          await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_addr = '127.0.0.1' AND client_port = ANY($1::int[])", [ports]);
        } finally {
          await admin.end();
        }
      },
      { pollIntervalMs: 200 },
      '15s',
    );
  }, 90_000);
});
