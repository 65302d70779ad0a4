// The pure parts of `stepwise-engine/ai`: prices and cost, budgets, Retry-After, JSON with Dates.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PRICES, costOf, priceOf, retryAfterMs } from '../src/ai/index.ts';
import { attemptUsage, checkBudget, emptySummary, overBudget, parseSummary, stepTotals, withAttempt, withOpen } from '../src/ai/metering/usage.ts';
import { fromFaithful, toFaithful } from '../src/ai/adapters/json-dates.ts';
import { classifyProviderError } from '../src/ai/adapters/provider-errors.ts';
import { InvalidArgumentError, NonRetryableError, RetryableError, workflow } from '../src/index.ts';

describe('prices and cost', () => {
  it('finds a model by exact id first, then by the longest matching prefix', () => {
    const prices = { ...DEFAULT_PRICES, 'gpt-4o-mini-2024-07-18': { input: 9, output: 9 } };
    expect(priceOf('gpt-4o-mini-2024-07-18', prices)).toEqual({ input: 9, output: 9 });
    expect(priceOf('gpt-4o-mini-2025', prices)).toBe(DEFAULT_PRICES['gpt-4o-mini*']);
    expect(priceOf('gpt-4o-2024-08-06', prices)).toBe(DEFAULT_PRICES['gpt-4o*']);
    expect(priceOf('claude-x', prices)).toBeUndefined();
  });

  it('bills cached input at its own rate and prices an unknown model at 0, saying so', () => {
    const prices = { m: { input: 2, output: 8, cachedInput: 0.5 } };
    expect(costOf('m', { inputTokens: 1_000_000, cachedInputTokens: 400_000, outputTokens: 500_000 }, prices)).toEqual({
      costUsd: (600_000 * 2) / 1e6 + (400_000 * 0.5) / 1e6 + 4,
      priced: true,
    });
    expect(costOf('other', { inputTokens: 10 }, prices)).toEqual({ costUsd: 0, priced: false });
  });

  it('sums attempts for the task, keeps only the attempt counts of steps still retrying, and closes the call in flight', () => {
    const attempts = [
      attemptUsage({ step: 'a', attempt: 1, model: 'm', outcome: 'failed' }, { inputTokens: 5 }, {}),
      attemptUsage({ step: 'a', attempt: 2, model: 'm', outcome: 'succeeded' }, { inputTokens: 5, outputTokens: 3 }, {}),
      attemptUsage({ step: 'b', attempt: 1, model: 'm', outcome: 'failed' }, { outputTokens: 1 }, {}),
    ];
    let s = withOpen(emptySummary(), 'a', { attempt: 1, model: 'm', startedAt: 0 });
    for (const u of attempts) s = withAttempt(s, u);
    expect(s.open).toEqual({});
    expect(s.retrying).toEqual({ b: 1 });
    expect(s.total).toMatchObject({ totalTokens: 14, attempts: 3 });
    // Per-step totals come from the attempts (the log), not the row.
    expect(stepTotals(attempts).a).toMatchObject({ inputTokens: 10, outputTokens: 3, totalTokens: 13, attempts: 2 });
  });

  it('keeps the usage column the same size however many calls a task makes', () => {
    let s = emptySummary();
    const size = (): number => JSON.stringify(s).length;
    for (let i = 0; i < 10; i++) s = withAttempt(s, attemptUsage({ step: `turn#${i}`, attempt: 1, model: 'm', outcome: 'succeeded' }, { inputTokens: 100, outputTokens: 50 }, {}));
    const after10 = size();
    for (let i = 10; i < 300; i++) s = withAttempt(s, attemptUsage({ step: `turn#${i}`, attempt: 1, model: 'm', outcome: 'succeeded' }, { inputTokens: 100, outputTokens: 50 }, {}));
    expect(size()).toBeLessThan(after10 + 20);
  });

  it('reads a column written with per-step totals, keeping their attempt counts', () => {
    const old = JSON.stringify({ total: emptySummary().total, steps: { a: { ...emptySummary().total, attempts: 2 } }, open: {} });
    expect(parseSummary(old).retrying).toEqual({ a: 2 });
  });
});

describe('budgets', () => {
  const spent = { ...emptySummary().total, totalTokens: 90, costUsd: 0.5 };
  it('refuses a call once spending reached the limit, or when its declared maximum would pass it', () => {
    expect(overBudget({ tokens: 100 }, spent, { tokens: 0, usd: 0 })).toBeNull();
    expect(overBudget({ tokens: 100 }, spent, { tokens: 11, usd: 0 })).toEqual({ limit: 'tokens', budget: 100, projected: 101 });
    expect(overBudget({ tokens: 90 }, spent, { tokens: 0, usd: 0 })).toMatchObject({ limit: 'tokens' });
    expect(overBudget({ usd: 0.5 }, spent, { tokens: 0, usd: 0 })).toMatchObject({ limit: 'usd', budget: 0.5 });
    expect(overBudget(undefined, spent, { tokens: 1e9, usd: 1e9 })).toBeNull();
  });

  it('rejects a malformed budget with a typed error naming the key', () => {
    expect(() => checkBudget({ tokens: -1 }, 'x')).toThrow(/budget.tokens must be a number ≥ 0/);
    expect(() => checkBudget({ dollars: 1 }, 'x')).toThrow(/unknown budget key "dollars"/);
    expect(() => workflow('w', async () => 1, { budget: { usd: Number.NaN } })).toThrow(InvalidArgumentError);
  });
});

describe('provider errors', () => {
  it('reads Retry-After in seconds, as an HTTP date, and retry-after-ms', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '2' }))).toBe(2000);
    expect(retryAfterMs({ 'retry-after-ms': '150', 'retry-after': '9' })).toBe(150);
    expect(retryAfterMs({ 'Retry-After': new Date(10_000).toUTCString() }, 4_000)).toBe(6_000);
    expect(retryAfterMs({})).toBeUndefined();
  });

  it('makes a 429 and a 5xx retryable, another 4xx not, and leaves aborts alone', () => {
    const e429 = classifyProviderError(Object.assign(new Error('slow down'), { status: 429, headers: new Headers({ 'retry-after': '1' }) }));
    expect(e429).toBeInstanceOf(RetryableError);
    expect((e429 as RetryableError).retryAfterMs).toBe(1000);
    expect(classifyProviderError(Object.assign(new Error('x'), { statusCode: 503, responseHeaders: {} }))).toBeInstanceOf(RetryableError);
    expect(classifyProviderError(Object.assign(new Error('bad key'), { status: 401 }))).toBeInstanceOf(NonRetryableError);
    const abort = Object.assign(new Error('aborted'), { name: 'AbortError' });
    expect(classifyProviderError(abort)).toBe(abort);
  });
});

describe('SDK results as JSON', () => {
  it('stores Dates as ISO strings and restores them where they were, through a JSON round trip', () => {
    const value = { response: { timestamp: new Date(1_764_579_600_000), id: 'r' }, steps: [{ at: new Date(0) }], n: 1, f: () => 1 };
    const stored = JSON.parse(JSON.stringify(toFaithful(value))) as ReturnType<typeof toFaithful>;
    expect(stored.value).toEqual({ response: { timestamp: '2025-12-01T09:00:00.000Z', id: 'r' }, steps: [{ at: '1970-01-01T00:00:00.000Z' }], n: 1 });
    const back = fromFaithful<typeof value>(stored);
    expect(back.response.timestamp).toEqual(new Date(1_764_579_600_000));
    expect(back.steps[0]?.at).toBeInstanceOf(Date);
  });
});
