/**
 * The multi-agent example: a planner splits a question into sub-questions, one research agent
 * (examples/research-agent: a tool-calling loop of durable model and tool calls) answers each as a
 * child task, in parallel, on whichever workers serve it, and a writer merges the answers.
 * - The planner parks while its sub-agents run (no worker slot held) and is woken as each ends.
 * - A crash of the planner's worker resumes it elsewhere without starting a sub-agent twice; a
 *   crash of a sub-agent's worker resumes that sub-agent at its interrupted call.
 * - `stepwise cancel <planner id>` stops every sub-agent mid-stream, then the planner.
 * - `stepwise show <planner id>` draws the tree and adds up the sub-agents' tokens and cost.
 *
 * Run by workers: `stepwise worker examples/multi-agent/workflow.ts` (both workflows).
 */
import { workflow } from '../../src/index.ts';
import { researchAgent } from '../research-agent/workflow.ts';

export { researchAgent } from '../research-agent/workflow.ts';

export interface PlannerInput {
  topic: string;
  /** How many sub-agents run at once. @defaultValue 3 */
  concurrency?: number;
}

/** The planner's sub-questions (a model could write them; a fixed plan keeps the example offline). */
function plan(topic: string): string[] {
  return [`What is a lease in ${topic}?`, `How does fencing protect a task in ${topic}?`, `What is a checkpoint in ${topic}?`];
}

export const planner = workflow('multi-agent-planner', async (ctx, input: PlannerInput) => {
  const questions = await ctx.step('plan', () => plan(input.topic));
  const answers = await ctx.children(
    researchAgent,
    questions.map((question) => ({ question, maxTurns: 6 })),
    { concurrency: input.concurrency ?? 3 },
  );
  return ctx.step('write', () => ({
    report: questions.map((q, i) => `## ${q}\n${answers[i]?.answer ?? ''}`).join('\n\n'),
    subAgents: answers.length,
    modelCalls: answers.reduce((n, a) => n + a.modelCalls, 0),
  }));
});
