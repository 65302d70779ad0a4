// The rate-limit throughput benchmark's workflow (also loaded by its spawned `stepwise worker`
// processes): one step that draws on the limit "bench-api" and returns where its draw was placed
// and when the call started. The limit comes from the environment (BENCH_RATE requests per
// BENCH_PER), exported as `rateLimits` for `stepwise worker`.
import { workflow, type RateLimits } from '../dist/index.js';

export const rateLimits: RateLimits = { 'bench-api': { requests: Number(process.env.BENCH_RATE ?? 20), per: process.env.BENCH_PER ?? '1s' } };

export const limitedCall = workflow('bench-limited-call', async (ctx, input: { key: string }) =>
  ctx.step('call', ({ rateLimit }) => ({ drawnAt: rateLimit?.drawnAt ?? null, calledAt: Date.now() }), { rateLimit: { name: 'bench-api', key: input.key } }),
);
