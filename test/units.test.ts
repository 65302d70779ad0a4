import { describe, expect, it } from 'vitest';
import { NonRetryableError, RetryableError, StepFailedError, isRetryable, isStepwiseError, toMs } from '../src/index.ts';
import { backoffMs, resolveRetry, shouldRetry } from '../src/retry.ts';
import { decodeError, deserializeError, encodeError, encodeJson } from '../src/serialize.ts';
import { newId } from '../src/ids.ts';
import { describeStoreUrl } from '../src/store-url.ts';

describe('durations', () => {
  it('accepts milliseconds and unit strings', () => {
    expect(toMs(250)).toBe(250);
    expect(toMs('500ms')).toBe(500);
    expect(toMs('30s')).toBe(30_000);
    expect(toMs('10m')).toBe(600_000);
    expect(toMs('2h')).toBe(7_200_000);
    expect(toMs('1d')).toBe(86_400_000);
    expect(toMs('1h30m')).toBe(5_400_000);
    expect(toMs('1.5s')).toBe(1500);
  });
  it('accepts a combination written with spaces between its parts', () => {
    expect(toMs('1h 30m')).toBe(5_400_000);
    expect(toMs('1d 2h 3m 4s 5ms')).toBe(86_400_000 + 7_200_000 + 180_000 + 4000 + 5);
  });
  it('refuses a combination that repeats a unit or puts a smaller unit first', () => {
    for (const bad of ['5s5s', '30m1h', '1h 1h', '10ms5s']) {
      expect(() => toMs(bad)).toThrow(/repeats a unit or puts a smaller one first/);
    }
  });
  it('rejects anything else with an actionable message', () => {
    for (const bad of ['', 'soon', '10 minutes', '-5s', '5x', -1, Number.NaN]) {
      expect(() => toMs(bad as never)).toThrow(/duration|milliseconds/);
    }
  });
});

describe('retry policy', () => {
  const policy = resolveRetry({ maxAttempts: 5, initialDelay: '1s', factor: 2, maxDelay: '10s' });
  it('backs off exponentially with full jitter, capped at maxDelay', () => {
    expect(backoffMs(policy, 1, undefined, () => 0.999999)).toBe(999);
    expect(backoffMs(policy, 3, undefined, () => 0.999999)).toBe(3999);
    expect(backoffMs(policy, 10, undefined, () => 0.999999)).toBe(9999);
    expect(backoffMs(policy, 3, undefined, () => 0)).toBe(0);
    const noJitter = resolveRetry({ initialDelay: 100, jitter: false });
    expect(backoffMs(noJitter, 2)).toBe(200);
  });
  it('honours Retry-After carried by the error', () => {
    expect(backoffMs(policy, 1, new RetryableError('slow down', { retryAfterMs: 42_000 }))).toBe(42_000);
  });
  it('is bounded by maxAttempts and never retries a NonRetryableError', () => {
    expect(shouldRetry(policy, new Error('x'), 4)).toBe(true);
    expect(shouldRetry(policy, new Error('x'), 5)).toBe(false);
    expect(shouldRetry(policy, new NonRetryableError('bad request'), 1)).toBe(false);
    const picky = resolveRetry({ maxAttempts: 5, retryIf: (e) => (e as Error).message.includes('429') });
    expect(shouldRetry(picky, new Error('HTTP 429'), 1)).toBe(true);
    expect(shouldRetry(picky, new Error('HTTP 400'), 1)).toBe(false);
    expect(shouldRetry(picky, new NonRetryableError('HTTP 429 but fatal'), 1)).toBe(false);
  });
  it('rejects a nonsensical attempt count', () => {
    expect(() => resolveRetry({ maxAttempts: 0 })).toThrow(/maxAttempts/);
  });
});

describe('serialisation of checkpointed values', () => {
  it('accepts plain JSON data and stores undefined as NULL', () => {
    expect(encodeJson({ a: [1, 'x', null, { b: true }] }, 'v')).toBe('{"a":[1,"x",null,{"b":true}]}');
    expect(encodeJson(undefined, 'v')).toBeNull();
  });
  it.each([
    [{ when: new Date(0) }, /the value.when is a Date \(use date.toISOString\(\)\)/],
    [{ m: new Map() }, /is a Map/],
    [{ n: Number.NaN }, /is NaN/],
    [{ n: 10n }, /bigint/],
    [{ f: () => 1 }, /is a function/],
    [[1, undefined], /\[1\] is undefined/],
    [new (class Thing {})(), /is a Thing/],
  ])('refuses %o with a message naming the path', (value, message) => {
    expect(() => encodeJson(value, 'The output of step "s"')).toThrow(message);
  });
  it('refuses cycles', () => {
    const a: Record<string, unknown> = {};
    a.self = a;
    expect(() => encodeJson(a, 'v')).toThrow(/cycle/);
  });
});

describe('error serialisation', () => {
  it('keeps code, retryable flag, retryAfter and cause through JSON', () => {
    const original = new StepFailedError('fetch#2', 3, new NonRetryableError('400 Bad Request'));
    const back = deserializeError(decodeError(encodeError(original)));
    expect(isStepwiseError(back, 'STEP_FAILED')).toBe(true);
    expect(back.name).toBe('StepFailedError');
    expect((back as unknown as { stepName: string }).stepName).toBe('fetch#2');
    expect(isRetryable(back.cause)).toBe(false);
    expect((back.cause as Error).message).toBe('400 Bad Request');
    const retry = deserializeError(decodeError(encodeError(new RetryableError('busy', { retryAfterMs: 5 }))));
    expect(isRetryable(retry)).toBe(true);
    expect((retry as unknown as { retryAfterMs: number }).retryAfterMs).toBe(5);
  });
  it('keeps foreign error names, codes and fields', () => {
    const e = Object.assign(new TypeError('boom'), { code: 'ECONNRESET', status: 503 });
    const back = deserializeError(decodeError(encodeError(e)));
    expect(back.name).toBe('TypeError');
    expect((back as Error & { code: string }).code).toBe('ECONNRESET');
    expect((back as Error & { status: number }).status).toBe(503);
  });
  it('stores a frame of a module tsx ran from a data: URL as the file it came from, not the module source', () => {
    // The shape tsx gives a CommonJS-format TypeScript module: its compiled source, URL-encoded,
    // then the file's path (and tsImport's namespace) in the query.
    const source = encodeURIComponent('var x = require("stepwise-engine");\n'.repeat(200));
    const e = new NonRetryableError('no');
    e.stack = [
      'NonRetryableError: no',
      `    at data:text/javascript,${source}(()=>{})?filePath=%2Fapp%2Fmy%20flows.ts%3Fnamespace%3D1796188267585:2:924`,
      `    at step (data:text/javascript,${source}?filePath=%2Fapp%2Fother.ts:7:3)`,
      '    at file:///app/node_modules/stepwise-engine/dist/run/attempt.js:102:22',
    ].join('\n');
    const stored = decodeError(encodeError(e)).stack as string;
    expect(stored.split('\n')).toEqual([
      'NonRetryableError: no',
      '    at /app/my flows.ts:2:924',
      '    at step (/app/other.ts:7:3)',
      '    at file:///app/node_modules/stepwise-engine/dist/run/attempt.js:102:22',
    ]);
  });
});

describe('task ids', () => {
  it('sort by creation time', () => {
    const a = newId(1_000);
    const b = newId(2_000);
    expect(a < b).toBe(true);
    expect(a).toHaveLength(26);
  });
  it('keep increasing within a millisecond and when the clock steps back a little, and start again from a clock set back further', async () => {
    const { firstIdAt } = await import('../src/ids.ts');
    const base = Date.UTC(2030, 0, 1);
    const first = newId(base);
    const same = newId(base);
    const slightlyBack = newId(base - 500);
    expect(first < same && same < slightlyBack).toBe(true);
    expect(slightlyBack.slice(0, 10)).toBe(first.slice(0, 10));
    // A clock a day behind (another engine's test clock): its ids tell its own time.
    const dayBack = newId(base - 86_400_000);
    expect(dayBack < first).toBe(true);
    expect(firstIdAt(base - 86_400_000) <= dayBack && dayBack < firstIdAt(base - 86_400_000 + 1)).toBe(true);
    expect(firstIdAt(base) <= first && firstIdAt(base) > dayBack).toBe(true);
  });
});

describe('store URLs', () => {
  it('takes the schema and the pool size out of a PostgreSQL URL and leaves the rest to the driver', () => {
    expect(describeStoreUrl('postgres://u@h:5432/db?schema=agents&poolSize=25&sslmode=require')).toEqual({
      dialect: 'postgres',
      url: 'postgres://u@h:5432/db?sslmode=require',
      schema: 'agents',
      poolSize: 25,
    });
    expect(describeStoreUrl('postgres://u@h/db')).toEqual({ dialect: 'postgres', url: 'postgres://u@h/db' });
  });
  it.each(['0', '-3', '2.5', 'lots', '5000'])('refuses poolSize=%s with a message saying what is allowed', (n) => {
    expect(() => describeStoreUrl(`postgres://u@h/db?poolSize=${n}`)).toThrow(/poolSize=.* whole number of connections from 1 to 1000/);
  });
  it('refuses an unknown SQLite option, naming the known ones', () => {
    expect(() => describeStoreUrl('sqlite:./x.db?journal=off')).toThrow(/Unknown option "journal".*synchronous, busyTimeoutMs/);
  });
});

describe('the sweeper (expired idempotency records, finished tasks past their retention)', () => {
  it('deletes in batches until a batch comes back short, and stops for good when there is no record store', async () => {
    const { Sweeper, SWEEP_BATCH } = await import('../src/sweeper.ts');
    let expired = 2 * SWEEP_BATCH + 7;
    const limits: number[] = [];
    const purger = new Sweeper({
      purge: async (limit) => {
        limits.push(limit);
        const n = Math.min(limit, expired);
        expired -= n;
        return n;
      },
      intervalMs: 0,
      onError: () => undefined,
    });
    expect(await purger.sweep()).toBe(2 * SWEEP_BATCH + 7);
    expect(limits).toEqual([SWEEP_BATCH, SWEEP_BATCH, SWEEP_BATCH]);
    expect(await purger.sweep()).toBe(0);

    const { InvalidArgumentError } = await import('../src/index.ts');
    let calls = 0;
    const errors: unknown[] = [];
    const none = new Sweeper({
      purge: async () => {
        calls++;
        throw new InvalidArgumentError('no idempotency records');
      },
      intervalMs: 5,
      onError: (e) => errors.push(e),
    });
    none.start();
    const { eventually } = await import('./support/engine.ts');
    await eventually(() => calls > 0, 20_000, 'the first sweep');
    await new Promise((r) => setTimeout(r, 50)); // ten more intervals: none of them sweeps
    await none.stop();
    expect(calls).toBe(1);
    expect(errors).toEqual([]);
  });

  it('starts no sweep while the last one still runs', async () => {
    const { Sweeper } = await import('../src/sweeper.ts');
    const { eventually, gate } = await import('./support/engine.ts');
    const release = gate();
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const slow = new Sweeper({
      purge: async () => {
        calls++;
        most = Math.max(most, ++inFlight);
        await release.promise;
        inFlight--;
        return 0;
      },
      intervalMs: 5,
      onError: () => undefined,
    });
    slow.start();
    await eventually(() => calls > 0, 20_000, 'the first sweep');
    await new Promise((r) => setTimeout(r, 50)); // ten intervals pass while it runs
    expect(calls).toBe(1);
    release.open();
    await eventually(() => calls > 1, 20_000, 'a sweep after the slow one');
    await slow.stop();
    expect(most).toBe(1);
  });
});
