// engine.idempotency.run on the engine's own database (SQLite here; PostgreSQL in the
// engine-on-postgres project): stored results, concurrent duplicates, fingerprints, failures,
// time to live, take-over of a dead owner's record, and the events each of these leaves.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, StoreUnavailableError, isStepwiseError, type TaskEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { FAST, eventually, gate, makeEngine, tempDbUrl } from './support/engine.ts';
import { collectIdempotency, ownerKilledWhileRunning } from './support/idempotency.ts';
import { workflow } from '../src/index.ts';

const codeOf = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'resolved',
    (e: unknown) => (isStepwiseError(e) ? e.code : `untyped: ${String(e)}`),
  );

describe('engine.idempotency.run', () => {
  it('runs the operation once and returns its stored result to every repeat', async () => {
    const engine = makeEngine();
    let calls = 0;
    const charge = (): Promise<{ receipt: string; calls: number }> => engine.idempotency.run('charge:order-1', () => ({ receipt: 'r-1', calls: ++calls }));
    const first = await charge();
    const second = await charge();
    expect(first).toEqual({ receipt: 'r-1', calls: 1 });
    expect(second).toEqual(first);
    expect(calls).toBe(1);
    const record = await engine.idempotency.get('charge:order-1');
    expect(record).toMatchObject({ status: 'completed', owner: null });
    expect(JSON.parse(record?.result as string)).toEqual(first);
  });

  it('makes a concurrent duplicate wait for the running operation and share its result', async () => {
    const engine = makeEngine();
    const started = gate();
    const release = gate();
    let calls = 0;
    const op = async (): Promise<string> => {
      calls++;
      started.open();
      await release.promise;
      return 'sent';
    };
    const first = engine.idempotency.run('notify:42', op);
    await started.promise;
    const duplicate = engine.idempotency.run('notify:42', op, { whileRunning: 'wait' });
    release.open();
    expect(await Promise.all([first, duplicate])).toEqual(['sent', 'sent']);
    expect(calls).toBe(1);
  });

  it("refuses a concurrent duplicate with IDEMPOTENCY_IN_PROGRESS when whileRunning is 'error'", async () => {
    const engine = makeEngine();
    const started = gate();
    const release = gate();
    const first = engine.idempotency.run('sync:7', async () => {
      started.open();
      await release.promise;
      return 1;
    });
    await started.promise;
    const refused = engine.idempotency.run('sync:7', () => 2, { whileRunning: 'error' });
    await expect(refused).rejects.toMatchObject({ code: ERROR_CODES.IDEMPOTENCY_IN_PROGRESS, retryable: true, idempotencyKey: 'sync:7' });
    release.open();
    expect(await first).toBe(1);
  });

  it('treats a repeat with another fingerprint as a CONFLICT, completed or in progress, and reports it', async () => {
    const { observer, events } = collectIdempotency();
    const engine = makeEngine({ observers: [observer] });
    await engine.idempotency.run('refund:9', () => 'ok', { fingerprint: { amount: 10 } });
    // Same parameters in another key order: the same request.
    expect(await engine.idempotency.run('refund:9', () => 'again', { fingerprint: { amount: 10 } })).toBe('ok');
    expect(await codeOf(engine.idempotency.run('refund:9', () => 'other', { fingerprint: { amount: 11 } }))).toBe(ERROR_CODES.CONFLICT);
    const started = gate();
    const release = gate();
    const running = engine.idempotency.run(
      'refund:10',
      async () => {
        started.open();
        await release.promise;
        return 'done';
      },
      { fingerprint: ['a'] },
    );
    await started.promise;
    expect(await codeOf(engine.idempotency.run('refund:10', () => 'x', { fingerprint: ['b'] }))).toBe(ERROR_CODES.CONFLICT);
    release.open();
    await running;
    expect(events.map((e) => [e.type, e.key])).toEqual([
      ['hit', 'refund:9'],
      ['conflict', 'refund:9'],
      ['conflict', 'refund:10'],
    ]);
  });

  it('records a failure, rethrows it, and lets a repeat run the operation again', async () => {
    const engine = makeEngine();
    let calls = 0;
    const op = (): string => {
      calls++;
      if (calls === 1) throw new Error('vendor down');
      return 'second time lucky';
    };
    await expect(engine.idempotency.run('upload:1', op)).rejects.toThrow('vendor down');
    const failed = await engine.idempotency.get('upload:1');
    expect(failed?.status).toBe('failed');
    expect(JSON.parse(failed?.error as string)).toMatchObject({ message: 'vendor down' });
    expect(await engine.idempotency.run('upload:1', op)).toBe('second time lucky');
    expect(calls).toBe(2);
  });

  it('forgets a completed record after its ttl: the next call runs again, and purge deletes expired records', async () => {
    const clock = new ManualClock();
    const engine = makeEngine({ clock });
    let calls = 0;
    const op = (): number => ++calls;
    expect(await engine.idempotency.run('daily:1', op, { ttl: '1h' })).toBe(1);
    await clock.advance('59m');
    expect(await engine.idempotency.run('daily:1', op, { ttl: '1h' })).toBe(1);
    await clock.advance('2m');
    expect(await engine.idempotency.run('daily:1', op, { ttl: '1h' })).toBe(2);
    await engine.idempotency.run('daily:2', op, { ttl: '1m' });
    await clock.advance('2m');
    expect(await engine.idempotency.purge()).toBe(1);
    expect(await engine.idempotency.get('daily:2')).toBeNull();
    expect(await engine.idempotency.get('daily:1')).not.toBeNull();
  });

  it('a running worker deletes expired records on its own and keeps the live ones', async () => {
    const clock = new ManualClock();
    const idle = workflow('idle', async () => null);
    const engine = makeEngine({ clock, workflows: [idle] });
    for (let i = 0; i < 5; i++) await engine.idempotency.run(`old:${i}`, () => i, { ttl: '1m' });
    await engine.idempotency.run('live', () => 'kept', { ttl: '1h' });
    await clock.advance('2m');
    expect(await engine.idempotency.get('old:0')).not.toBeNull(); // expired, not yet deleted
    const worker = engine.worker({ ...FAST, idempotencyPurgeMs: 20 });
    await worker.start();
    const gone = async (): Promise<boolean> => {
      for (let i = 0; i < 5; i++) if ((await engine.idempotency.get(`old:${i}`)) !== null) return false;
      return true;
    };
    await eventually(gone, 20_000, 'the expired records to be deleted');
    await worker.stop();
    expect(await engine.idempotency.get('live')).toMatchObject({ status: 'completed' });
    expect(() => engine.worker({ idempotencyPurgeMs: -1 })).toThrow(/idempotencyPurgeMs/);
    // Beyond what a timer holds (Node would fire it at once, over and over).
    expect(() => engine.worker({ idempotencyPurgeMs: 30 * 86_400_000 })).toThrow(/idempotencyPurgeMs/);
  });

  it('takes over the record of an owner process that was SIGKILLed, once its lease has run out', async () => {
    const { observer, events } = collectIdempotency();
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, observers: [observer] });
    await engine.ready();
    const deadPid = await ownerKilledWhileRunning({ db: url, key: 'export:big', leaseMs: 600 });
    const stuck = await engine.idempotency.get('export:big');
    expect(stuck).toMatchObject({ status: 'in_progress' });
    expect(stuck?.owner).toContain(`:${deadPid}:`);
    // Waits while the dead owner's lease lasts, then takes the record over and runs the operation.
    const result = await engine.idempotency.run('export:big', ({ takeover }) => ({ takeover }), { fingerprint: { n: 1 } });
    expect(result).toEqual({ takeover: true });
    expect(await engine.idempotency.get('export:big')).toMatchObject({ status: 'completed' });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'takeover', key: 'export:big' });
    expect(events[0]?.previousOwner).toBe(stuck?.owner);
  }, 60_000);

  it('writes hits, conflicts and take-overs of a task into its log', async () => {
    const clock = new ManualClock();
    const wf = workflow('idem-log', async () => 'x');
    const engine = makeEngine({ clock, workflows: [wf] });
    const { id } = await engine.start('idem-log');
    const owner = await engine.idempotency.backend();
    // An owner that never renews (it died): its record is taken over once its lease is over.
    await owner.acquire({ key: 'k:1', owner: 'dead-owner', fingerprint: null, now: clock.now(), leaseMs: 1, ttlMs: 60_000, taskId: null });
    await clock.advance('2s');
    // PostgreSQL judges leases by its own clock: let that 1 ms lease lapse there too.
    await new Promise((r) => setTimeout(r, 20));
    await engine.idempotency.run('k:1', () => 1, { taskId: id, fingerprint: 'f' });
    await engine.idempotency.run('k:1', () => 2, { taskId: id, fingerprint: 'f' });
    await codeOf(engine.idempotency.run('k:1', () => 3, { taskId: id, fingerprint: 'g' }));
    const history = (await engine.get(id)).history.filter((e: TaskEvent) => e.type.startsWith('idempotency:'));
    expect(history.map((e) => [e.type, 'key' in e ? e.key : null])).toEqual([
      ['idempotency:takeover', 'k:1'],
      ['idempotency:hit', 'k:1'],
      ['idempotency:conflict', 'k:1'],
    ]);
    expect(history[0]).toMatchObject({ previousOwner: 'dead-owner', actor: { kind: 'system', id: 'idempotency' } });
    expect((await engine.get(id)).history.map((e) => e.seq)).toEqual((await engine.get(id)).history.map((_, i) => i + 1));
  });

  it('refuses bad keys and options with INVALID_ARGUMENT, before touching any record', async () => {
    const engine = makeEngine();
    const op = (): number => 1;
    expect(await codeOf(engine.idempotency.run('', op))).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(await codeOf(engine.idempotency.run('x'.repeat(256), op))).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(await codeOf(engine.idempotency.run('k', op, { whileRunning: 'block' as 'wait' }))).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(await codeOf(engine.idempotency.run('k', op, { ttl: 'soon' }))).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(await codeOf(engine.idempotency.run('k', 'not a function' as unknown as () => number))).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(await engine.idempotency.get('k')).toBeNull();
  });
});

describe('engine.idempotency.run: an owner that loses its store or its record', () => {
  it('aborts an owner whose renewals failed for about a lease, and refuses its completion once another caller took over', async () => {
    const clock = new ManualClock();
    const engine = makeEngine({ clock });
    const backend = await engine.idempotency.backend();
    const renew = backend.renew.bind(backend);
    const started = gate();
    const release = gate();
    let ownerSignal: AbortSignal | undefined;
    const first = engine.idempotency.run(
      'upload:1',
      async ({ signal }) => {
        ownerSignal = signal;
        started.open();
        await release.promise;
        return 'first';
      },
      { lease: 300 },
    );
    await started.promise;
    // The store is cut off from this owner: every renewal fails.
    backend.renew = () => Promise.reject(new StoreUnavailableError('store away'));
    for (let i = 0; i < 20 && !ownerSignal?.aborted; i++) {
      await clock.advance(100);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(ownerSignal?.aborted).toBe(true);
    expect(ownerSignal?.reason).toMatchObject({ code: ERROR_CODES.CONFLICT });
    backend.renew = renew;
    await clock.advance(400);
    // The lease lapses on the store's clock (PostgreSQL's own, in real time) as well as this one.
    let second: string | undefined;
    await eventually(async () => {
      const r = engine.idempotency.run('upload:1', ({ takeover }) => (takeover ? 'second' : 'not a take-over'), { lease: 300, whileRunning: 'error' });
      const code = await codeOf(r);
      if (code === ERROR_CODES.IDEMPOTENCY_IN_PROGRESS) return false;
      second = await r;
      return true;
    });
    expect(second).toBe('second');
    release.open();
    // The first owner learns it lost: its result is not recorded and not returned.
    await expect(first).rejects.toMatchObject({ code: ERROR_CODES.CONFLICT, message: expect.stringContaining('lost idempotency key "upload:1"') });
    expect(await engine.idempotency.run('upload:1', () => 'third')).toBe('second');
  });

  it('retries the completion write through a store blip instead of leaving the record in progress', async () => {
    const engine = makeEngine();
    const backend = await engine.idempotency.backend();
    const complete = backend.complete.bind(backend);
    let blips = 2;
    backend.complete = (...args) => (blips-- > 0 ? Promise.reject(new StoreUnavailableError('blip')) : complete(...args));
    let calls = 0;
    expect(await engine.idempotency.run('invoice:5', () => ++calls, { lease: 3000 })).toBe(1);
    expect(await engine.idempotency.get('invoice:5')).toMatchObject({ status: 'completed' });
    expect(await engine.idempotency.run('invoice:5', () => ++calls)).toBe(1);
    expect(calls).toBe(1);
  });

  it('says that the effect happened when the completion cannot be recorded within the lease', async () => {
    const engine = makeEngine();
    const backend = await engine.idempotency.backend();
    backend.complete = () => Promise.reject(new StoreUnavailableError('store away'));
    await expect(engine.idempotency.run('invoice:6', () => 'sent', { lease: 100 })).rejects.toMatchObject({
      code: ERROR_CODES.STORE_UNAVAILABLE,
      message: expect.stringContaining('its effect happened'),
    });
  });
});

// SQLite is one machine's file: its callers share that machine's clock. PostgreSQL is shared by
// machines whose clocks may differ, so leases there are set and judged by the database's clock.
describe.skipIf(process.env.STEPWISE_TEST_STORE !== 'postgres')('engine.idempotency.run on PostgreSQL: leases on the database clock', () => {
  it('does not let an engine whose clock is 40 s fast take over a live owner', async () => {
    const db = tempDbUrl();
    const slow = makeEngine({ store: db, clock: new ManualClock(Date.now()) });
    const fast = makeEngine({ store: db, clock: new ManualClock(Date.now() + 40_000) });
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
});
