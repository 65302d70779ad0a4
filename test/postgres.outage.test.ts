// The database goes away under a running worker (every connection dropped, new ones refused for
// a while) and comes back: the worker keeps running, retries its writes, re-subscribes to
// notifications, and the task finishes with every completed step run once.
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { pipeline, triple } from './fixtures/crash-workflows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { eventually, tempDir } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const schema = freshSchemaName('sw_outage');
afterAll(async () => dropSchema(schema));

describe.skipIf(!(await hasPostgres()))('PostgreSQL outage', () => {
  it('survives the database connection dropping mid-run and resumes when it is back', async () => {
    const pgPort = Number(new URL(PG_URL).port || 5432);
    const proxy = await startTcpProxy(pgPort);
    const direct = `${PG_URL}?schema=${schema}`;
    const viaProxy = (() => {
      const u = new URL(PG_URL);
      u.port = String(proxy.port);
      u.searchParams.set('schema', schema);
      return u.toString();
    })();
    const log = join(tempDir(), 'effects.log');
    const engine = new Engine({ store: direct, workflows: [pipeline, triple] });
    try {
      await engine.ready();
      const w = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', viaProxy, '--lease-ms', '10000', '--heartbeat-ms', '300', '--poll-ms', '200'], { STEPWISE_TEST_LOG: log });
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      const { id } = await engine.start(pipeline, { slowMs: 1500 });
      await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'slow-write to start');
      // The database disappears while slow-write runs; its checkpoint will find no database.
      proxy.cut();
      await new Promise((r) => setTimeout(r, 2000));
      proxy.restore();
      expect((await engine.result<{ writtenBy: number }>(id, { timeout: '60s' })).writtenBy).toBe(w.pid);
      expect(w.child.exitCode).toBeNull(); // the worker survived
      // The step finished during the outage: its checkpoint was retried until the database was back.
      expect(w.output()).toMatch(/failed during writing checkpoints \(attempt 1\)/);
      expect(w.output()).toMatch(/step slow-write completed/);
      const effects = readLog(log).filter((l) => l.event === 'effect').map((l) => l.key);
      expect(effects.filter((k) => k.endsWith('fetch#1'))).toHaveLength(1);
      expect(effects.filter((k) => k.endsWith('notify#1'))).toHaveLength(1);
      // Notifications work again: a new task is picked up (this worker polls every 200 ms anyway,
      // so this shows the whole path works after the outage rather than proving NOTIFY).
      const next = await engine.start(triple, { n: 1 });
      expect(await engine.result(next.id, { timeout: '30s' })).toBe(6);
      expect(proxy.accepted).toBeGreaterThan(2); // it reconnected
      w.child.kill('SIGTERM');
      expect((await w.exited).code).toBe(0);
    } finally {
      await engine.close();
      await proxy.close();
    }
  }, 90_000);
});
