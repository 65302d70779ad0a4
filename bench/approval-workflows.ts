// The approval benchmark's workflow (also loaded by its spawned worker process).
import { workflow } from '../dist/index.js';

/** Parks on an approval; its next step returns the time it began (decide → next step latency). */
export const approvalThenStep = workflow('bench-approval', async (ctx) => {
  await ctx.approval('review', { approvers: ['bench'] });
  return ctx.step('after', () => Date.now());
});
