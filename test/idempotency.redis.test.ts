// engine.idempotency.run on Redis (SET NX PX to take a key, Lua-guarded owner writes), against the
// real Redis at $STEPWISE_TEST_REDIS_URL (default 127.0.0.1:6379). Without Redis: skipped with a
// message; with CI=true: an error.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, ERROR_CODES, RedisIdempotency, aesGcmCodec, isStepwiseError } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, gate, tempDbUrl } from './support/engine.ts';
import { collectIdempotency, ownerKilledWhileRunning } from './support/idempotency.ts';
import { REDIS_URL, hasRedis } from './support/redis.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const up = await hasRedis();
const prefix = `stepwise-test:${randomBytes(4).toString('hex')}:`;
const engines: Engine[] = [];
const backends: RedisIdempotency[] = [];

function redisEngine(options: { clock?: ManualClock; observers?: ReturnType<typeof collectIdempotency>['observer'][] } = {}): { engine: Engine; backend: RedisIdempotency } {
  const backend = new RedisIdempotency({ url: REDIS_URL, prefix });
  const engine = new Engine({ store: tempDbUrl(), idempotency: backend, ...options });
  backends.push(backend);
  engines.push(engine);
  return { engine, backend };
}

const codeOf = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'resolved',
    (e: unknown) => (isStepwiseError(e) ? e.code : `untyped: ${String(e)}`),
  );

describe.skipIf(!up)('engine.idempotency.run on Redis', () => {
  let admin: Redis;
  beforeAll(() => {
    admin = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.close()));
    await Promise.all(backends.map((b) => b.close()));
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length) await admin.del(...keys);
    await admin.quit();
  });

  it("keeps an engine codec's results sealed in Redis too, and hands them back opened", async () => {
    const backend = new RedisIdempotency({ url: REDIS_URL, prefix });
    const engine = new Engine({ store: tempDbUrl(), idempotency: backend, codec: aesGcmCodec({ keys: { k1: Buffer.alloc(32, 9) }, current: 'k1' }) });
    backends.push(backend);
    engines.push(engine);
    const secret = 'SECRET-RESULT-5b1e';
    expect(await engine.idempotency.run('sealed:1', () => ({ secret }))).toEqual({ secret });
    expect(await engine.idempotency.run('sealed:1', () => ({ secret: 'again' }))).toEqual({ secret });
    const raw = (await admin.get(`${prefix}sealed:1`)) as string;
    expect(JSON.parse(raw)).toMatchObject({ status: 'completed' });
    expect(raw).not.toContain(secret);
    // The backend handed out is one, and still the Redis one's (its close, its kind).
    const handed = await engine.idempotency.backend();
    expect(handed).toBe(await engine.idempotency.backend());
    expect(handed.kind).toBe('redis');
    expect(typeof (handed as RedisIdempotency).close).toBe('function');
  });

  it('runs once and returns the stored result; the Redis key carries the record with its expiry', async () => {
    const { engine } = redisEngine();
    let calls = 0;
    const op = (): { n: number } => ({ n: ++calls });
    expect(await engine.idempotency.run('pay:1', op, { ttl: '10m' })).toEqual({ n: 1 });
    expect(await engine.idempotency.run('pay:1', op, { ttl: '10m' })).toEqual({ n: 1 });
    expect(calls).toBe(1);
    const stored = JSON.parse((await admin.get(`${prefix}pay:1`)) as string) as { status: string; result: string };
    expect(stored.status).toBe('completed');
    expect(JSON.parse(stored.result)).toEqual({ n: 1 });
    const ttl = await admin.pttl(`${prefix}pay:1`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(600_000);
  });

  it('lets exactly one of many concurrent callers (on separate connections) run the operation', async () => {
    const callers = [redisEngine(), redisEngine(), redisEngine()];
    let calls = 0;
    const release = gate();
    const op = async (): Promise<string> => {
      calls++;
      await release.promise;
      return 'once';
    };
    const all = callers.flatMap(({ engine }) => [engine.idempotency.run('hot:1', op), engine.idempotency.run('hot:1', op)]);
    setTimeout(() => release.open(), 50);
    expect(await Promise.all(all)).toEqual(Array(6).fill('once'));
    expect(calls).toBe(1);
  });

  it('refuses a duplicate while running (IDEMPOTENCY_IN_PROGRESS) and a reused key with other parameters (CONFLICT)', async () => {
    const { observer, events } = collectIdempotency();
    const { engine } = redisEngine({ observers: [observer] });
    const started = gate();
    const release = gate();
    const running = engine.idempotency.run(
      'order:5',
      async () => {
        started.open();
        await release.promise;
        return 'ok';
      },
      { fingerprint: { qty: 1 } },
    );
    await started.promise;
    expect(await codeOf(engine.idempotency.run('order:5', () => 'x', { whileRunning: 'error', fingerprint: { qty: 1 } }))).toBe(ERROR_CODES.IDEMPOTENCY_IN_PROGRESS);
    expect(await codeOf(engine.idempotency.run('order:5', () => 'x', { fingerprint: { qty: 2 } }))).toBe(ERROR_CODES.CONFLICT);
    release.open();
    expect(await running).toBe('ok');
    expect(await engine.idempotency.run('order:5', () => 'x', { fingerprint: { qty: 1 } })).toBe('ok');
    expect(events.map((e) => [e.type, e.backend])).toEqual([
      ['conflict', 'redis'],
      ['hit', 'redis'],
    ]);
  });

  it('marks a failure so that a repeat runs again', async () => {
    const { engine, backend } = redisEngine();
    await expect(
      engine.idempotency.run('mail:3', () => {
        throw new Error('smtp 451');
      }),
    ).rejects.toThrow('smtp 451');
    expect((await backend.get('mail:3'))?.status).toBe('failed');
    expect(await engine.idempotency.run('mail:3', () => 'sent')).toBe('sent');
  });

  it("refuses an owner's late write once its record was taken over (the Lua guard)", async () => {
    const clock = new ManualClock();
    const { backend } = redisEngine({ clock });
    const now = clock.now();
    const req = { key: 'slow:1', fingerprint: null, now, leaseMs: 200, ttlMs: 60_000, taskId: null };
    expect(await backend.acquire({ ...req, owner: 'a' })).toMatchObject({ acquired: true, takeover: false });
    expect(await backend.acquire({ ...req, owner: 'b' })).toMatchObject({ acquired: false });
    // Leases run on Redis's clock: b takes over once a's lease has lapsed there.
    await eventually(async () => (await backend.acquire({ ...req, owner: 'b' })).acquired);
    expect(await backend.get('slow:1')).toMatchObject({ owner: 'b', status: 'in_progress' });
    expect(await backend.renew('slow:1', 'a', now + 1600, 1000)).toBe(false);
    expect(await backend.complete('slow:1', 'a', '"late"', now + 1600, 60_000)).toBe(false);
    expect(await backend.complete('slow:1', 'b', '"fresh"', now + 1700, 60_000)).toBe(true);
    expect(await backend.get('slow:1')).toMatchObject({ status: 'completed', result: '"fresh"', owner: null });
  });

  it('does not let an engine whose clock is 40 s fast take over a live owner (leases on the Redis clock)', async () => {
    const slow = redisEngine({ clock: new ManualClock(Date.now()) }).engine;
    const fast = redisEngine({ clock: new ManualClock(Date.now() + 40_000) }).engine;
    const started = gate();
    const release = gate();
    let calls = 0;
    const first = slow.idempotency.run('skew:1', async () => {
      calls++;
      started.open();
      await release.promise;
      return 'slow';
    });
    await started.promise;
    expect(await codeOf(fast.idempotency.run('skew:1', () => ++calls, { whileRunning: 'error' }))).toBe(ERROR_CODES.IDEMPOTENCY_IN_PROGRESS);
    release.open();
    expect(await first).toBe('slow');
    expect(calls).toBe(1);
  });

  it('takes over the record of a SIGKILLed owner process once its lease has run out', async () => {
    const { observer, events } = collectIdempotency();
    const { engine } = redisEngine({ observers: [observer] });
    const deadPid = await ownerKilledWhileRunning({ db: tempDbUrl(), key: 'report:big', leaseMs: 600, redis: { url: REDIS_URL, prefix } });
    const stuck = await engine.idempotency.get('report:big');
    expect(stuck?.status).toBe('in_progress');
    expect(stuck?.owner).toContain(`:${deadPid}:`);
    // Waits while the dead owner's lease lasts, then takes over.
    expect(await engine.idempotency.run('report:big', ({ takeover }) => takeover, { fingerprint: { n: 1 } })).toBe(true);
    expect(events.map((e) => [e.type, e.previousOwner])).toEqual([['takeover', stuck?.owner]]);
  }, 60_000);

  it('fails with STORE_UNAVAILABLE within its timeout when Redis stops answering (a blackholed connection)', async () => {
    const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    const backend = new RedisIdempotency({ url: `redis://127.0.0.1:${proxy.port}`, prefix, timeoutMs: 300 });
    backends.push(backend);
    const engine = new Engine({ store: tempDbUrl(), idempotency: backend });
    engines.push(engine);
    try {
      expect(await engine.idempotency.run('hole:1', () => 'ok')).toBe('ok');
      proxy.blackhole();
      let calls = 0;
      expect(await codeOf(engine.idempotency.run('hole:2', () => ++calls))).toBe(ERROR_CODES.STORE_UNAVAILABLE);
      expect(calls).toBe(0);
    } finally {
      proxy.restore();
      await proxy.close();
    }
  }, 30_000);
});
