// The AI SDK as durable steps (`stepwise-engine/ai`): generateText / streamText / generateObject
// with ctx, and durableModel under the SDK's own tool loop, through a real HTTP model
// (openaiChatModel over the openai client) against the local OpenAI-compatible server.
import OpenAI from 'openai';
import * as ai from 'ai';
import { z } from 'zod';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TaskFailedError, workflow, type UsageEvent } from '../src/index.ts';
import { durableModel, generateObject, generateText, openaiChatModel, streamText } from '../src/ai/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
let model: ReturnType<typeof openaiChatModel>;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  model = openaiChatModel(new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL }), 'gpt-4o-mini');
});
afterEach(async () => {
  await fake.close();
});

const usageOf = (history: Array<{ type: string }>): UsageEvent['usage'][] => history.filter((e): e is UsageEvent => e.type === 'usage:attempt').map((e) => e.usage);

describe('generateText / streamText / generateObject (AI SDK)', () => {
  it('generateText is checkpointed: a resumed task reads it back (response.timestamp still a Date) without calling the model', async () => {
    fake.script([{ kind: 'text', chunks: ['Bonjour'], usage: { prompt_tokens: 12, completion_tokens: 3 } }]);
    const seen: Array<{ text: string; isDate: boolean }> = [];
    const wf = workflow('greet', async (ctx) => {
      const r = await generateText(ctx, 'greet', { model, prompt: 'Say hello in French' });
      seen.push({ text: r.text, isDate: r.response.timestamp instanceof Date });
      // Parks the task: the next run replays the call above.
      await ctx.waitForEvent('go');
      return r.text;
    });
    const engine = makeEngine({ workflows: [wf] });
    // The parked run is not kept in memory, so the next run replays.
    await startWorker(engine, { keepParked: 0 });
    const { id } = await engine.start('greet');
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'go', null);
    expect(await engine.result(id)).toBe('Bonjour');
    expect(seen).toEqual([
      { text: 'Bonjour', isDate: true },
      { text: 'Bonjour', isDate: true },
    ]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.headers['idempotency-key']).toBe(`v1:${id}:greet#1`);
    const info = await engine.get(id);
    expect(usageOf(info.history)).toMatchObject([{ step: 'greet', outcome: 'succeeded', inputTokens: 12, outputTokens: 3 }]);
  });

  it('stores the reply once (not again in the last step and the response message), and hands back the whole result', async () => {
    const reply = `reply-${'x'.repeat(3000)}-end`;
    fake.script([{ kind: 'text', chunks: [reply], usage: { prompt_tokens: 5, completion_tokens: 700 } }]);
    const wf = workflow('once', async (ctx) => {
      const r = await generateText(ctx, 'write', { model, prompt: 'go' });
      await ctx.waitForEvent('go');
      return { text: r.text, last: r.steps.at(-1)?.text, message: r.response.messages[0] };
    });
    // Without the payload store, the row holds the JSON as it was recorded.
    const engine = makeEngine({ workflows: [wf], payloads: false });
    await startWorker(engine);
    const { id } = await engine.start('once');
    await waitForStatus(engine, id, 'waiting');
    const store = await engine.ready();
    const [row] = await store.getSteps(id);
    expect(row!.output!.split(reply).length - 1).toBe(1);
    await engine.signal(id, 'go', null);
    // Replayed from the packed record: every copy is back.
    expect(await engine.result(id)).toEqual({ text: reply, last: reply, message: { role: 'assistant', content: [{ type: 'text', text: reply }] } });
  });

  it('streamText hands each delta to onDelta and checkpoints the final text', async () => {
    fake.script([{ kind: 'text', chunks: ['a', 'b', 'c'], usage: { prompt_tokens: 4, completion_tokens: 3 } }]);
    const deltas: string[] = [];
    const wf = workflow('stream', async (ctx) => (await streamText(ctx, 'write', { model, prompt: 'abc', onDelta: (d) => void deltas.push(d) })).text);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('stream');
    expect(await engine.result(id)).toBe('abc');
    expect(deltas).toEqual(['a', 'b', 'c']);
    expect(fake.requests[0]?.body.stream).toBe(true);
    expect(usageOf((await engine.get(id)).history)).toMatchObject([{ step: 'write', outcome: 'succeeded', inputTokens: 4, outputTokens: 3 }]);
  });

  it('generateObject repairs an invalid object by sending the validation issues back, and bills every call', async () => {
    fake.script([
      { kind: 'text', chunks: ['{"title": 42}'], usage: { prompt_tokens: 10, completion_tokens: 5 } },
      { kind: 'text', chunks: ['{"title": "Durable agents"}'], usage: { prompt_tokens: 30, completion_tokens: 6 } },
    ]);
    const wf = workflow('extract', async (ctx) => {
      const r = await generateObject(ctx, 'extract', { model, schema: z.object({ title: z.string() }), prompt: 'Title?' });
      return { title: r.object.title, repairs: r.repairs };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('extract');
    expect(await engine.result(id)).toEqual({ title: 'Durable agents', repairs: 1 });
    expect(fake.requests).toHaveLength(2);
    const repairPrompt = JSON.stringify(fake.requests[1]?.body.messages);
    expect(repairPrompt).toContain('does not match the required JSON schema');
    expect(repairPrompt).toContain('title');
    expect(usageOf((await engine.get(id)).history)).toMatchObject([{ step: 'extract', outcome: 'succeeded', inputTokens: 40, outputTokens: 11 }]);
  });

  it('generateObject gives up after its repair budget: the step fails for good (no engine retry) and the spent tokens are billed', async () => {
    fake.script([{ kind: 'text', chunks: ['{"title": 1}'], usage: { prompt_tokens: 10, completion_tokens: 5 } }]);
    const wf = workflow(
      'stubborn',
      async (ctx) => (await generateObject(ctx, 'extract', { model, schema: z.object({ title: z.string() }), prompt: 'Title?', repair: { maxAttempts: 1 } })).object,
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('stubborn');
    const err = await engine.result(id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskFailedError);
    expect(fake.requests).toHaveLength(2);
    const info = await engine.get(id);
    expect(info.status === 'failed' && JSON.stringify(info.error)).toContain('after 1 repair');
    expect(usageOf(info.history)).toMatchObject([{ outcome: 'failed', inputTokens: 20, outputTokens: 10, estimated: false }]);
  });

  it("generateObject hands an object that stays invalid after its repairs to the step's onExhausted: skip returns the declared fallback", async () => {
    fake.script([{ kind: 'text', chunks: ['{"title": 1}'], usage: { prompt_tokens: 10, completion_tokens: 5 } }]);
    const wf = workflow('lenient', async (ctx) => {
      const r = await generateObject(ctx, 'extract', {
        model,
        schema: z.object({ title: z.string() }),
        prompt: 'Title?',
        repair: { maxAttempts: 1 },
        step: { onExhausted: 'skip', fallback: { title: 'untitled' } },
      });
      return r.object;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('lenient');
    expect(await engine.result(id)).toEqual({ title: 'untitled' });
    expect(fake.requests).toHaveLength(2);
    const info = await engine.get(id);
    expect(info.steps.find((s) => s.name === 'extract')?.status).toBe('completed');
    expect(usageOf(info.history)).toMatchObject([{ outcome: 'failed', inputTokens: 20, outputTokens: 10 }]);
  });

  it('ctx.usage records the usage a plain step reports, priced from the workflow table', async () => {
    const wf = workflow(
      'manual',
      async (ctx) => {
        await ctx.step('call', async (s) => {
          await ctx.usage(s, { model: 'house-model', inputTokens: 2_000_000, outputTokens: 1_000_000 });
          return 1;
        });
      },
      { prices: { 'house-model': { input: 1, output: 3 } } },
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('manual');
    await engine.result(id);
    const info = await engine.get(id);
    expect(usageOf(info.history)).toMatchObject([{ step: 'call', model: 'house-model', costUsd: 5, priced: true }]);
    expect(info.usage?.steps.call).toMatchObject({ totalTokens: 3_000_000, costUsd: 5, attempts: 1 });
    // Without the history, the per-step totals come from the usage entries alone.
    const light = await engine.get(id, { history: false });
    expect(light.history).toEqual([]);
    expect(light.usage?.steps).toEqual(info.usage?.steps);
  });
});

describe('durableModel', () => {
  it("makes each model call of the SDK's tool loop its own step: a resumed loop pays for none of them again", async () => {
    fake.script([
      { kind: 'tools', calls: [{ id: 'call-1', name: 'lookup', arguments: '{"q":"stepwise"}' }], usage: { prompt_tokens: 20, completion_tokens: 8 } },
      { kind: 'text', chunks: ['Stepwise is durable.'], usage: { prompt_tokens: 40, completion_tokens: 5 } },
    ]);
    let lookups = 0;
    const wf = workflow('agent', async (ctx) => {
      const r = await ai.generateText({
        model: durableModel(ctx, model),
        prompt: 'What is stepwise?',
        stopWhen: ai.stepCountIs(4),
        tools: {
          lookup: ai.tool({
            description: 'Looks a term up',
            inputSchema: z.object({ q: z.string() }),
            execute: ({ q }) =>
              ctx.step('lookup', () => {
                lookups++;
                return `${q}: a durable execution engine`;
              }),
          }),
        },
      });
      await ctx.waitForEvent('go');
      return { text: r.text, isDate: r.response.timestamp instanceof Date };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('agent');
    await waitForStatus(engine, id, 'waiting');
    await engine.signal(id, 'go', null);
    expect(await engine.result(id)).toEqual({ text: 'Stepwise is durable.', isDate: true });
    expect(fake.requests).toHaveLength(2);
    expect(lookups).toBe(1);
    // The tool result went back to the model.
    expect(JSON.stringify(fake.requests[1]?.body.messages)).toContain('a durable execution engine');
    const info = await engine.get(id);
    expect(info.steps.filter((s) => s.kind === 'step').map((s) => s.name)).toEqual(['model', 'lookup', 'model#2']);
    expect(fake.requests.map((r) => r.headers['idempotency-key'])).toEqual([`v1:${id}:model#1`, `v1:${id}:model#2`]);
    expect(info.usage?.total).toMatchObject({ inputTokens: 60, outputTokens: 13, attempts: 2 });
  });

  it('streams through a durable model: the SDK gets the stored parts, the step its deltas', async () => {
    fake.script([{ kind: 'text', chunks: ['x', 'y'], usage: { prompt_tokens: 2, completion_tokens: 2 } }]);
    const wf = workflow('stream-agent', async (ctx) => {
      const r = ai.streamText({ model: durableModel(ctx, model, { name: 'llm' }), prompt: 'xy' });
      return r.text;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('stream-agent');
    expect(await engine.result(id)).toBe('xy');
    expect((await engine.get(id)).steps.map((s) => s.name)).toEqual(['llm']);
  });
});
