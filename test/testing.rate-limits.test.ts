// checkResume with rate limits: a workflow whose steps draw on a limit, one of them parking on a
// reservation because the window is full, is crashed before and after each durable write; every
// resumed run ends as the run without a crash (the draw is not a journaled call: replay stays
// deterministic, and the parked reservation's row is part of the journal it resumes from).
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { checkResume } from '../src/testing/index.ts';

const twoCalls = workflow('two-limited-calls', async (ctx, input: { tenant: string }) => {
  const first = await ctx.step('first', ({ rateLimit }) => `first at ${rateLimit?.key}`, { rateLimit: { name: 'api', key: input.tenant } });
  // The window holds one call per minute: this one parks until the first leaves it.
  const second = await ctx.step('second', ({ rateLimit }) => `second at ${rateLimit?.key}`, { rateLimit: { name: 'api', key: input.tenant } });
  return [first, second];
});

describe('checkResume: steps on a rate limit', () => {
  it('passes at every crash point, the second call parked on its reservation', async () => {
    const report = await checkResume(twoCalls, { input: { tenant: 'acme' }, rateLimits: { api: { requests: 1, per: '1m' } } });
    expect(report.baseline.outcome).toEqual({ status: 'succeeded', output: ['first at acme', 'second at acme'] });
    // The park on the reservation is one of the durable writes crashed around.
    expect(report.baseline.writes.map((w) => w.what)).toEqual([
      'the result of step "first"',
      'the park transition with the rate-limit reservation of step "second"',
      'the complete transition with the result of step "second"',
    ]);
    expect(report.points).toHaveLength(6);
    expect(report.points.every((p) => p.reached)).toBe(true);
  });
});
