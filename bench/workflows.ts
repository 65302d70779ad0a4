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
