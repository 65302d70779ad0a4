// The rate-limit log of the store (drawRate / settleRate), on both stores (the engine suites' SQLite
// file or PostgreSQL schema: STEPWISE_TEST_STORE): draws from several connections at once, with clocks
// that disagree, never put more than the limit in any interval of its length; a full window places
// a draw when capacity returns; settled tokens count for later draws. And the placing rule itself.
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/index.ts';
import type { RateDrawRequest } from '../src/store.ts';
import { placeDraw, placeNow } from '../src/store-sql/rate-window.ts';
import { TEST_STORE, tempDbUrl } from './support/engine.ts';
import { busiestWindow } from './support/rate-calls.ts';

const T0 = Date.UTC(2030, 0, 1);
const opened: Store[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

async function stores(n: number): Promise<Store[]> {
  const url = tempDbUrl();
  const first = await openStore(url);
  await first.migrate();
  const all = [first];
  for (let i = 1; i < n; i++) all.push(await openStore(url));
  opened.push(...all);
  return all;
}

const req = (over: Partial<RateDrawRequest>): RateDrawRequest => ({ name: 'api', key: '', requests: 5, tokens: null, perMs: 1000, takeRequests: 1, takeTokens: 0, now: T0, ...over });

describe(`rate-limit draws in the store (${TEST_STORE})`, () => {
  it('draws from three connections at once, with clocks up to 300 ms apart, never exceed the limit in any window', async () => {
    const [a, b, c] = await stores(3);
    const skews = [0, 300, -200];
    const draws = await Promise.all([a, b, c].flatMap((s, i) => Array.from({ length: 20 }, (_, k) => (s as Store).drawRate(req({ now: T0 + skews[i]! + k * 37, key: 'shared' })))));
    const times = draws.map((d) => d.at);
    expect(new Set(draws.map((d) => d.id)).size).toBe(60);
    expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(5);
    // Back to back: 60 draws of 5 a second take 12 windows, none left unused.
    expect(Math.max(...times) - Math.min(...times)).toBeLessThan(12 * 1000);
  });

  it('places a draw when capacity returns, per key, and counts settled tokens', async () => {
    const [s] = (await stores(1)) as [Store];
    const tokens = (take: number, now = T0, key = 't'): RateDrawRequest => req({ key, requests: null, tokens: 1000, takeRequests: 1, takeTokens: take, now });
    const first = await s.drawRate(tokens(700));
    expect(first.at).toBe(T0);
    // 700 + 700 > 1000: the next goes when the first leaves the window.
    expect((await s.drawRate(tokens(700, T0 + 10))).at).toBe(T0 + 1000);
    // Another key has its own window.
    expect((await s.drawRate(tokens(700, T0 + 10, 'u'))).at).toBe(T0 + 10);
    // Settled to its real 100 tokens, a draw leaves room for another 700 at once.
    const settled = await s.drawRate(tokens(700, T0, 'v'));
    await s.settleRate(settled.id, 100);
    expect((await s.drawRate(tokens(700, T0 + 10, 'v'))).at).toBe(T0 + 10);
  });
});

describe('the placing rule', () => {
  it('goes at once when the window has room, else when enough of the oldest draws have left it', () => {
    const r = req({ requests: 3, perMs: 100, now: 1000 });
    expect(placeNow(r, { requests: 2, tokens: 0, lastAt: 990 })).toBe(1000);
    expect(placeNow(r, { requests: 3, tokens: 0, lastAt: 990 })).toBeNull();
    expect(placeNow(r, { requests: 0, tokens: 0, lastAt: 1200 })).toBeNull();
    const log = [
      { at: 950, requests: 1, tokens: 0 },
      { at: 960, requests: 1, tokens: 0 },
      { at: 990, requests: 1, tokens: 0 },
    ];
    expect(placeDraw(r, log)).toBe(1050);
    expect(placeDraw({ ...r, takeRequests: 2 }, log)).toBe(1060);
    // A draw placed in the future: the next never goes before it.
    expect(placeDraw(r, [...log, { at: 1100, requests: 0, tokens: 0 }])).toBe(1100);
    // Tokens: the oldest draws leave until the new one fits.
    const t = req({ requests: null, tokens: 100, perMs: 100, now: 1000, takeTokens: 60 });
    expect(
      placeDraw(t, [
        { at: 950, requests: 1, tokens: 50 },
        { at: 980, requests: 1, tokens: 30 },
      ]),
    ).toBe(1050);
  });
});
