/**
 * The research agent: a tool-calling loop (model → tools → model, up to `maxTurns` model calls)
 * where every model call and every tool call is a durable step. The loop is the AI SDK's own
 * (`streamText` with `tools` and `stopWhen`); `durableModel` makes each of its model calls a step
 * (`model`, `model#2`, …), and each tool's `execute` is a `ctx.step` (`search`, `read`, …). So:
 * - a crash mid-loop resumes at the call that was in flight: finished model calls and tool calls
 *   are read back from the journal, not paid for or run again;
 * - `stepwise cancel <id>` stops the model mid-stream (the HTTP connection is closed);
 * - tokens and cost of every attempt are recorded (`stepwise show <id>`), under a budget.
 *
 * The model: with OPENAI_API_KEY set, a real one (STEPWISE_AGENT_MODEL, default gpt-4o-mini; the
 * openai client also honours OPENAI_BASE_URL for any OpenAI-compatible provider); otherwise the
 * offline stand-in at STEPWISE_AGENT_BASE_URL (see offline-model.ts; main.ts starts it).
 *
 * Run by a worker: `stepwise worker examples/research-agent/workflow.ts`.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import * as ai from 'ai';
import { z } from 'zod';
import { workflow } from '../../src/index.ts';
import { durableModel, openaiChatModel } from '../../src/ai/index.ts';

/** The library the agent researches: the research-brief example's documents. */
const LIBRARY = join(dirname(fileURLToPath(import.meta.url)), '../research-brief/docs');

/** The model the agent talks to (see the module doc). */
export function agentModel(): ReturnType<typeof openaiChatModel> {
  if (process.env.OPENAI_API_KEY) return openaiChatModel(new OpenAI(), process.env.STEPWISE_AGENT_MODEL ?? 'gpt-4o-mini');
  const baseURL = process.env.STEPWISE_AGENT_BASE_URL;
  if (!baseURL) throw new Error('research-agent: set OPENAI_API_KEY for a real model, or STEPWISE_AGENT_BASE_URL for the offline one (npm run example:agent starts it).');
  return openaiChatModel(new OpenAI({ apiKey: 'offline', baseURL }), 'offline-researcher');
}

/** Documents ranked by how many of the query's words they contain. */
function search(query: string): Array<{ doc: string; title: string; score: number }> {
  const words = new Set(query.toLowerCase().match(/[a-z]{4,}/g) ?? []);
  return readdirSync(LIBRARY)
    .filter((f) => f.endsWith('.md'))
    .map((doc) => {
      const text = readFileSync(join(LIBRARY, doc), 'utf8');
      const score = (text.toLowerCase().match(/[a-z]{4,}/g) ?? []).filter((w) => words.has(w)).length;
      return { doc, title: text.split('\n')[0]?.replace(/^#\s*/, '') ?? doc, score };
    })
    .filter((h) => h.score > 0)
    .sort((a, b) => b.score - a.score)
    .slice(0, 3);
}

export interface AgentInput {
  question: string;
  /** Model calls at most. @defaultValue 6 */
  maxTurns?: number;
}

export const researchAgent = workflow(
  'research-agent',
  async (ctx, input: AgentInput) => {
    const result = ai.streamText({
      model: durableModel(ctx, agentModel()),
      maxRetries: 0, // retries are the engine's, per step
      system: 'You are a research assistant. Use the tools to find and read documents in the library, then answer from them in a short paragraph.',
      prompt: input.question,
      stopWhen: ai.stepCountIs(input.maxTurns ?? 6),
      onError: () => undefined, // a failed or cancelled call ends the task; the engine records why
      tools: {
        search: ai.tool({
          description: 'Searches the library; returns the best matching documents.',
          inputSchema: z.object({ query: z.string() }),
          execute: ({ query }) => ctx.step('search', () => search(query)),
        }),
        read: ai.tool({
          description: 'Reads one document of the library by its file name.',
          inputSchema: z.object({ doc: z.string() }),
          execute: ({ doc }) =>
            ctx.step('read', () => {
              if (!/^[\w.-]+\.md$/.test(doc)) return `No document named ${doc}.`;
              try {
                return readFileSync(join(LIBRARY, doc), 'utf8');
              } catch {
                return `No document named ${doc}.`;
              }
            }),
        }),
      },
    });
    const [answer, steps] = await Promise.all([result.text, result.steps]);
    return { answer, modelCalls: steps.length, toolCalls: steps.flatMap((s) => s.toolCalls.map((c) => c.toolName)) };
  },
  {
    // A runaway loop stops here: the call that would pass it fails the task with BUDGET_EXCEEDED.
    budget: { usd: 0.5 },
    // The offline model's make-believe price, so that the example shows a cost.
    prices: { 'offline-researcher': { input: 0.15, output: 0.6 } },
  },
);
