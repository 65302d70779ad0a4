// The model helpers of stepwise-engine/ai on a rate limit: each call draws its expected tokens
// (prompt estimate + maxOutputTokens) before it goes, and settles the draw to its real usage after,
// so the window counts what the provider counted. A local fake model (MockLanguageModelV3).
import { describe, expect, it } from 'vitest';
import { MockLanguageModelV3 } from 'ai/test';
import { workflow } from '../src/index.ts';
import { generateText } from '../src/ai/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, eventually, gate, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const T0 = Date.UTC(2030, 0, 1);

/** A model whose calls report 30 input and 20 output tokens; a call waits for `hold` when it is set. */
function fakeModel(): { model: MockLanguageModelV3; calls: () => number; setHold: (g: { promise: Promise<void> } | null) => void } {
  let calls = 0;
  const state: { hold: { promise: Promise<void> } | null } = { hold: null };
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      calls++;
      const held = state.hold;
      if (held) await held.promise;
      return {
        content: [{ type: 'text' as const, text: 'ok' }],
        finishReason: { unified: 'stop' as const, raw: undefined },
        usage: { inputTokens: { total: 30, noCache: 30, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 20, text: 20, reasoning: 0 } },
        warnings: [],
      };
    },
  });
  return {
    model,
    calls: () => calls,
    setHold: (g) => (state.hold = g),
  };
}

describe(`model calls on a rate limit (${TEST_STORE})`, () => {
  it('draws the expected tokens before the call and settles the real usage after it', async () => {
    const clock = new ManualClock(T0);
    const fake = fakeModel();
    // The prompt is about 100 tokens and the call may write 500: about 600 tokens are drawn.
    const ask = workflow('ask', async (ctx, input: { tenant: string }) => {
      const r = await generateText(ctx, 'ask', { model: fake.model, prompt: 'x'.repeat(400), maxOutputTokens: 500, rateLimit: { name: 'llm', key: input.tenant } });
      return r.text;
    });
    const engine = makeEngine({ workflows: [ask], clock, rateLimits: { llm: { tokens: 1000, per: '1m' } } });
    await startWorker(engine, { concurrency: 4 });
    // A: drew ~600, then settled to its 50 real tokens.
    const a = await engine.start('ask', { tenant: 'acme' });
    expect(await engine.result(a.id)).toBe('ok');
    // B goes at once (50 + ~600 ≤ 1000: A was settled) and holds its call open.
    const held = gate();
    fake.setHold(held);
    const b = await engine.start('ask', { tenant: 'acme' });
    await waitForStatus(engine, b.id, 'running');
    await eventually(() => fake.calls() === 2, 10_000, 'the second call');
    // C must wait: B's ~600 tokens were drawn before its call, which has not ended.
    fake.setHold(null);
    const c = await engine.start('ask', { tenant: 'acme' });
    await waitForStatus(engine, c.id, 'waiting');
    expect((await engine.explain(c.id)).wait).toMatchObject({ kind: 'rate-limit', limit: 'llm', key: 'acme', step: 'ask', until: T0 + 63_000 }); // the window, and the 5% a call may start late
    expect(fake.calls()).toBe(2);
    // Another tenant has a window of its own.
    const d = await engine.start('ask', { tenant: 'beta' });
    expect(await engine.result(d.id)).toBe('ok');
    held.open();
    expect(await engine.result(b.id)).toBe('ok');
    await clock.advance('63s');
    expect(await engine.result(c.id)).toBe('ok');
    expect(fake.calls()).toBe(4);
  });

  it('fails the task when a model call names a limit the engine does not have', async () => {
    const fake = fakeModel();
    const ask = workflow('ask-typo', async (ctx) => (await generateText(ctx, 'ask', { model: fake.model, prompt: 'hi', rateLimit: 'lmm' })).text);
    const engine = makeEngine({ workflows: [ask], rateLimits: { llm: { requests: 5, per: '1m' } } });
    await startWorker(engine);
    const { id } = await engine.start('ask-typo', {});
    await waitForStatus(engine, id, 'failed');
    const t = await engine.get(id);
    expect(t.status === 'failed' && t.error.message).toContain('rateLimit "lmm" is not a limit of this engine (known: llm)');
    expect(fake.calls()).toBe(0);
  });
});
