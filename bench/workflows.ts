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
