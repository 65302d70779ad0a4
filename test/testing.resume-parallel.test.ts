// checkResume compares the task's calls by identity, not by the order they finished in: sub-agents
// of a tool loop that run in parallel and run again after a crash interleave their calls as timing
// decides, which is no divergence; a call made or left out still is.
import { describe, expect, it } from 'vitest';
import { workflow, type WorkflowContext } from '../src/index.ts';
import { checkResume, isResumeCheckError, type ResumeCheckError } from '../src/testing/index.ts';

async function failure(p: Promise<unknown>): Promise<ResumeCheckError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!isResumeCheckError(e)) throw new Error(`expected a ResumeCheckError, got ${e instanceof Error ? e.stack : String(e)}`);
  return e;
}

/** Which of the two sub-agents is the slow one in this run: it changes from run to run, as a network's latency does. */
let run = 0;
const slowAgent = (): string => (run % 2 === 1 ? 'researcher' : 'critic');

/** A sub-agent: a tool loop of model turns and tool calls, each a step; the slow agent's model answers later. */
async function subAgent(ctx: WorkflowContext, agent: string, turns: number): Promise<string> {
  let notes = '';
  for (let turn = 1; turn <= turns; turn++) {
    const reply = await ctx.step(`${agent}:model`, async () => {
      await new Promise((r) => setTimeout(r, agent === slowAgent() ? 15 : 0));
      return `${agent} turn ${turn}`;
    });
    notes += await ctx.step('tool:search', () => `[${reply}]`);
  }
  return notes;
}

describe('checkResume: sub-agents in parallel', () => {
  it('passes a tool loop whose two sub-agents run in parallel, though their calls finish in another order when they run again after a crash', async () => {
    const team = workflow('parallel-agents', async (ctx) => {
      const plan = await ctx.step('plan', () => 'two agents');
      const [a, b] = await Promise.all([subAgent(ctx, 'researcher', 2), subAgent(ctx, 'critic', 2)]);
      return ctx.step('merge', () => `${plan}: ${a} ${b}`);
    });
    const report = await checkResume(team, { setup: () => void run++ });
    expect(report.baseline.outcome).toEqual({
      status: 'succeeded',
      output: 'two agents: [researcher turn 1][researcher turn 2] [critic turn 1][critic turn 2]',
    });
    // In the run without a crash the researcher was slow: the critic's calls took the first positions.
    expect(report.baseline.calls.slice(1, 3).map((c) => c.step)).toEqual(['researcher:model', 'critic:model']);
    const order = (calls: ReadonlyArray<{ step: string }>) => calls.map((c) => c.step).join(' ');
    expect(order(report.baseline.calls)).toContain('critic:model#2');
    // Every crash point passed, and the calls that ran again after a crash did run in another order.
    expect(report.points.length).toBe(report.baseline.writes.length * 2);
    expect(report.points.some((p) => p.ranAgain.includes('critic:model') && p.ranAgain.includes('researcher:model'))).toBe(true);
  });

  it('still catches a sub-agent that makes one more call once the task resumes (a turn counter outside any step)', async () => {
    let bodyRuns = 0;
    const drifting = workflow('drifting-agents', async (ctx) => {
      bodyRuns++; // outside any step: a resumed task runs the body again
      const [a, b] = await Promise.all([subAgent(ctx, 'researcher', 1), subAgent(ctx, 'critic', bodyRuns > 1 ? 2 : 1)]);
      return ctx.step('merge', () => `${a} ${b}`);
    });
    const e = await failure(checkResume(drifting, { setup: () => void ((bodyRuns = 0), run++) }));
    expect(e.reason).toBe('calls-differ');
    expect(e.message).toContain('call 2 of "critic:model": no call without a crash, step "critic:model#2" (completed) after it');
  });
});
