// The database goes away under a running worker (every connection dropped, new ones refused for
// a while) and comes back: the worker keeps running, retries its writes, re-subscribes to
// notifications, and the task finishes with every completed step run once.
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine, isStepwiseError, type Worker } from '../src/index.ts';
import { pipeline, triple } from './fixtures/crash-workflows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { eventually, tempDir } from './support/engine.ts';
import { readLog, spawnCli } from './support/processes.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import type { WakeEvent } from '../src/store.ts';

const schema = freshSchemaName('sw_outage');

/** The store URL of `schema` through the proxy on `port`, with short deadlines. */
function throughProxy(port: number, extra: Record<string, string> = {}): string {
  const u = new URL(PG_URL);
  u.port = String(port);
  u.searchParams.set('schema', schema);
  for (const [k, v] of Object.entries(extra)) u.searchParams.set(k, v);
  return u.toString();
}
const SHORT = { connectTimeoutMs: '1000', statementTimeoutMs: '1000' };
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
      // slow-write runs until the test creates `release`: however slowly the test sees it start, the
      // database is cut while it runs.
      const release = join(tempDir(), 'release-slow-write');
      const w = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', viaProxy, '--lease-ms', '10000', '--heartbeat-ms', '300', '--poll-ms', '200'], {
        STEPWISE_TEST_LOG: log,
        STEPWISE_TEST_HOLD_UNTIL: release,
      });
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      const { id } = await engine.start(pipeline, { slowMs: 1500 });
      await eventually(() => readLog(log).some((l) => l.event === 'start'), 20_000, 'slow-write to start');
      // The database disappears while slow-write runs; its checkpoint will find no database.
      proxy.cut();
      writeFileSync(release, '');
      // The outage lasts until the step has finished and its checkpoint failed for want of a database.
      await eventually(() => /failed during writing checkpoints \(attempt 1\)/.test(w.output()), 30_000, 'the checkpoint to fail during the outage');
      expect(readLog(log).some((l) => l.event === 'effect' && l.key.endsWith('slow-write#1'))).toBe(true);
      proxy.restore();
      expect((await engine.result<{ writtenBy: number }>(id, { timeout: '60s' })).writtenBy).toBe(w.pid);
      expect(w.child.exitCode).toBeNull(); // the worker survived
      // The step finished during the outage: its checkpoint was retried until the database was back.
      expect(w.output()).toMatch(/failed during writing checkpoints \(attempt 1\)/);
      expect(w.output()).toMatch(/step slow-write completed/);
      const effects = readLog(log)
        .filter((l) => l.event === 'effect')
        .map((l) => l.key);
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

  it('a worker cut off by a network that drops packets reports it, keeps its promises and recovers by itself', async () => {
    const proxy = await startTcpProxy(Number(new URL(PG_URL).port || 5432));
    const direct = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [triple] });
    const cutOff = new Engine({ store: throughProxy(proxy.port, SHORT), workflows: [triple] });
    let worker: Worker | undefined;
    try {
      await direct.ready();
      // No polling to speak of: after the partition, only a LISTEN connection that noticed it was
      // dead and reconnected wakes this worker for new work.
      worker = cutOff.worker({ pollIntervalMs: 3_600_000, heartbeatMs: 200, leaseMs: 20_000 });
      const errors: Array<{ during: string; code: unknown }> = [];
      worker.on('worker:error', (e) => errors.push({ during: e.during, code: (e.error as { code?: unknown }).code }));
      await worker.start();
      const first = await direct.start(triple, { n: 1 });
      expect(await direct.result(first.id, { timeout: '30s' })).toBe(6);

      proxy.blackhole();
      // A task of its own keeps the heartbeat busy; the claim loop, the heartbeat and the LISTEN
      // connection all get no answer, and the calls fail instead of hanging.
      await eventually(() => errors.some((e) => e.code === 'STORE_UNAVAILABLE'), 30_000, 'a worker:error reporting the unreachable store');
      expect(worker.state).toBe('running');
      // Commands answer: a write fails as unavailable, a wait for a result ends at its timeout.
      const startError = await cutOff.start(triple, { n: 2 }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isStepwiseError(startError, 'STORE_UNAVAILABLE')).toBe(true);
      const waitError = await cutOff.result(first.id, { timeout: '500ms' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isStepwiseError(waitError, 'TIMEOUT') || isStepwiseError(waitError, 'STORE_UNAVAILABLE')).toBe(true);
      // The LISTEN connection noticed it was dead and tried to reconnect (accepted, never answered).
      const acceptedDuringPartition = proxy.names.length;
      await eventually(() => proxy.names.slice(acceptedDuringPartition).some((n) => n.startsWith('stepwise-listen')), 30_000, 'the LISTEN connection to reconnect');

      proxy.restore();
      // Back by itself: a new task is picked up by this worker, woken by a notification.
      const second = await direct.start(triple, { n: 10 });
      expect(await direct.result(second.id, { timeout: '60s' })).toBe(33);
      expect((await direct.get(second.id)).runs).toBe(1);

      // Cut off again, it still stops and closes.
      proxy.blackhole();
      await worker.stop({ graceMs: 500 });
      expect(worker.state).toBe('stopped');
      await cutOff.close();
    } finally {
      proxy.restore();
      await worker?.stop();
      await cutOff.close();
      await direct.close();
      await proxy.close();
    }
  }, 120_000);

  it('ready() against a server that accepts the connection and never answers fails with STORE_UNAVAILABLE', async () => {
    const proxy = await startTcpProxy(Number(new URL(PG_URL).port || 5432));
    proxy.blackhole();
    const engine = new Engine({ store: throughProxy(proxy.port, SHORT), workflows: [triple] });
    try {
      const error = await engine.ready().then(
        () => null,
        (e: unknown) => e,
      );
      expect(isStepwiseError(error, 'STORE_UNAVAILABLE')).toBe(true);
      expect(String((error as Error).message)).toContain(`127.0.0.1:${proxy.port}`);
      expect(proxy.accepted).toBeGreaterThan(0); // it did reach the server: the start-up got no answer
    } finally {
      await engine.close();
      await proxy.close();
    }
  }, 60_000);

  it('a LISTEN connection whose peer goes silent notices, reconnects once the network is back, and hears notifications again', async () => {
    const proxy = await startTcpProxy(Number(new URL(PG_URL).port || 5432));
    const listening = new PostgresStore(throughProxy(proxy.port).replace(/\?.*$/, ''), { schema, connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    const sender = new PostgresStore(PG_URL, { schema });
    const heard: WakeEvent[] = [];
    try {
      await sender.migrate();
      const stop = await listening.subscribe((e) => heard.push(e), 'work');
      await sender.notify({ reason: 'task', taskId: 'before' });
      await eventually(() => heard.some((e) => e.taskId === 'before'), 20_000, 'the first notification');
      // A new LISTEN connection through the proxy is its reconnect (the store's other connections,
      // such as the probe of orphaned connections, are named otherwise).
      const accepted = proxy.names.length;
      proxy.blackhole();
      await eventually(() => proxy.names.slice(accepted).some((n) => n.startsWith('stepwise-listen')), 30_000, 'the silent LISTEN connection to be dropped and reopened');
      proxy.restore();
      // Back: it says it may have missed something, and hears what is sent from now on.
      await eventually(() => heard.some((e) => e.taskId === '*'), 30_000, 'the look-again event after the reconnect');
      await eventually(
        async () => {
          await sender.notify({ reason: 'task', taskId: 'after' });
          return heard.some((e) => e.taskId === 'after');
        },
        30_000,
        'a notification after the partition',
      );
      await stop();
    } finally {
      await listening.close();
      await sender.close();
      await proxy.close();
    }
  }, 90_000);
});
