// Workflows used by the benchmark (also loaded by spawned worker processes).
import { workflow } from '../dist/index.js';

/** `n` sequential no-op steps: measures the per-step cost of the engine. */
export const manySteps = workflow('bench-many-steps', async (ctx, input: { n: number }) => {
  for (let i = 0; i < input.n; i++) await ctx.step('noop', () => i);
  return input.n;
});

/** Three no-op steps: measures task throughput. */
export const threeSteps = workflow('bench-three-steps', async (ctx) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  await ctx.step('c', () => 3);
  return 3;
});

/** Returns the time its first step began: for wake-up latency (start → first step running). */
export const stamp = workflow('bench-stamp', async (ctx) => ctx.step('began', () => Date.now()));

/**
 * A step that waits for its AbortSignal and, when it fires, appends the time (ms, sub-ms precision,
 * comparable across processes on one machine) to the file named in the input: for cancel latency.
 */
export const cancellable = workflow('bench-cancellable', async (ctx, input: { log: string }) => {
  const { appendFileSync } = await import('node:fs');
  await ctx.step(
    'wait',
    ({ signal, taskId }) =>
      new Promise((_resolve, reject) => {
        appendFileSync(input.log, `started ${taskId} ${performance.timeOrigin + performance.now()}\n`);
        signal.addEventListener(
          'abort',
          () => {
            appendFileSync(input.log, `aborted ${taskId} ${performance.timeOrigin + performance.now()}\n`);
            reject(signal.reason as Error);
          },
          { once: true },
        );
      }),
  );
});

/** A child of the fan-out bench: one no-op step that returns when it ran (ms since the epoch). */
export const fanLeaf = workflow('bench-fan-leaf', async (ctx, _input: { i: number }) => ctx.step('noop', () => Date.now()));

/** A parent that fans out to `n` children of `fanLeaf` and returns the latest time one of them ran. */
export const fanParent = workflow('bench-fan-parent', async (ctx, input: { n: number }) => {
  const ran = await ctx.children(
    fanLeaf,
    Array.from({ length: input.n }, (_, i) => ({ i })),
  );
  return Math.max(...ran);
});

/**
 * A chat session (issue 32's shape): waits for each message (parked between them), answers it in a
 * step with a reply of about 1 KB, and ends on "bye". For turn latency at turn 10 and turn 300.
 */
export const chatTurns = workflow('bench-chat', async (ctx) => {
  const { chatMessages, replyStep } = await import('../dist/ai/index.js');
  const transcript: string[] = [];
  for await (const m of chatMessages(ctx, { idle: '10m' })) {
    transcript.push(m.text);
    const reply = await ctx.step(replyStep(m.id), () => `${'a reply of some length '.repeat(45)}(turn ${transcript.length})`);
    transcript.push(reply);
    if (m.text === 'bye') break;
  }
  return transcript.length;
});

/**
 * One streamed chat completion from the stamped model of bench/stream-model.ts (`model` says how
 * many chunks and how far apart): for stream frame latency and throughput.
 */
export const streamStamps = workflow('bench-stream', async (ctx, input: { baseURL: string; model: string }) => {
  const { chatCompletion } = await import('../dist/ai/index.js');
  const { default: OpenAI } = await import('openai');
  const client = new OpenAI({ apiKey: 'bench-key', baseURL: input.baseURL, maxRetries: 0 });
  const r = await chatCompletion(ctx, 'answer', client, { model: input.model, messages: [{ role: 'user', content: 'go' }], stream: true });
  return r.choices[0]?.message.content?.length ?? 0;
});
