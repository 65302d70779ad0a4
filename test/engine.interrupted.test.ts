// A step whose AbortSignal fired is interrupted, whatever its function returns: the AI SDK's
// streamText ends its text stream quietly on abort, so a step that collects the stream returns a
// truncated answer as if it had finished. Such a result is never checkpointed as completed.
import { describe, expect, it } from 'vitest';
import { streamText } from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { workflow } from '../src/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const WORDS = 300;

/** A model that streams WORDS words; the first call slowly (so that it can be interrupted), later calls at once. */
function slowFirstModel(delayMs = 5): { model: MockLanguageModelV3; calls: () => number } {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doStream: async () => {
      calls++;
      const words = Array.from({ length: WORDS }, (_, i) => `w${i} `);
      return {
        stream: simulateReadableStream({
          chunks: [
            { type: 'text-start' as const, id: '1' },
            ...words.map((delta) => ({ type: 'text-delta' as const, id: '1', delta })),
            { type: 'text-end' as const, id: '1' },
            {
              type: 'finish' as const,
              finishReason: { unified: 'stop' as const, raw: undefined },
              usage: { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: WORDS, text: WORDS, reasoning: 0 } },
            },
          ],
          chunkDelayInMs: calls === 1 ? delayMs : null,
        }),
      };
    },
  });
  return { model, calls: () => calls };
}

/** Words the step has received so far, over all its attempts. */
const streamed = { words: 0 };

function writer(name: string, model: MockLanguageModelV3, options: { timeout?: string; retry?: number } = {}) {
  streamed.words = 0;
  return workflow(name, async (ctx) => {
    const text = await ctx.step(
      'write',
      async ({ signal }) => {
        const result = streamText({ model, prompt: 'write 300 words', abortSignal: signal });
        let out = '';
        for await (const delta of result.textStream) {
          out += delta;
          streamed.words++;
        }
        return out;
      },
      options,
    );
    return { words: text.trim().split(/\s+/).length };
  });
}

describe(`interrupted steps are never checkpointed (${TEST_STORE}, real AI SDK stream)`, () => {
  it('hands a task back when the worker stops mid-stream, and the next worker writes the whole answer', async () => {
    const m = slowFirstModel();
    const wf = writer('graceful-stop', m.model);
    const engine = makeEngine({ workflows: [wf] });
    const first = await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await eventually(() => streamed.words >= 10, 10_000, 'ten words of the first model call');
    await first.stop({ graceMs: 20 });
    expect(streamed.words).toBeLessThan(WORDS); // stopped mid-stream
    const stopped = await engine.get(id);
    expect(stopped.status).toBe('pending');
    expect(stopped.steps.filter((s) => s.status === 'completed')).toEqual([]);
    await startWorker(engine);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ words: WORDS });
    expect(m.calls()).toBe(2);
  });

  it('ends a task cancelled mid-stream as cancelled, with no completed step recorded', async () => {
    // 300 words at 50 ms (15 s): the cancel (a read and a write, then the news to the worker) reaches
    // the step mid-stream however slow the database is; at 5 ms the stream could end first.
    const m = slowFirstModel(50);
    const wf = writer('cancel-mid-stream', m.model);
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    await eventually(() => streamed.words >= 10, 10_000, 'ten words of the model call');
    await engine.cancel(id);
    await waitForStatus(engine, id, 'cancelled');
    expect(streamed.words).toBeLessThan(WORDS); // cancelled mid-stream
    expect(m.calls()).toBe(1);
    const info = await engine.get(id);
    expect(info.steps.filter((s) => s.status === 'completed')).toEqual([]);
    expect(info.history.some((e) => e.type === 'step:completed')).toBe(false);
  });

  it('counts a step that times out mid-stream as a failed attempt, not as its truncated answer', async () => {
    // The first answer takes 3 s, the second none: a 1 s limit cuts the first, with room to spare
    // for the second on a busy machine.
    const m = slowFirstModel(10);
    const wf = writer('timeout-mid-stream', m.model, { timeout: '1s', retry: 2 });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf, undefined);
    expect(await engine.result(id, { timeout: '20s' })).toEqual({ words: WORDS });
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ name: 'write', status: 'completed', attempts: 2 });
    const retrying = info.history.find((e) => e.type === 'step:retrying');
    expect(retrying?.type === 'step:retrying' && retrying.step.error?.code).toBe('STEP_TIMEOUT');
  });
});
