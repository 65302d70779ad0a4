/**
 * @module ai/adapters/durable-model
 * `durableModel(ctx, model)`: an AI SDK model whose every call is a durable step. Handed to the
 * SDK's own tool loop (`generateText({ model: durableModel(ctx, model), tools, stopWhen })`), each
 * model call is checkpointed as it completes, so a crash in turn 7 of a loop resumes there: the
 * six calls before are read back from the journal, not paid for again. Each call gets the step's
 * AbortSignal and idempotency key (replacing the SDK's), runs once per engine attempt, and is
 * metered like every model step. What the provider returns is stored as JSON faithfully — its
 * `Date`s (`response.timestamp`) come back as Dates on replay — so a plain middleware's
 * NOT_SERIALIZABLE does not happen. A streamed call is consumed inside its step (its text deltas
 * published as the step's stream) and replayed to the SDK from the stored parts.
 *
 * Calls are steps named `name` (default `model`), numbered by occurrence: `model`, `model#2`, …
 * Tools with side effects should be steps too (`ctx.step` inside `execute`) so that they are not
 * repeated either.
 */
import { wrapLanguageModel } from 'ai';
import type { WorkflowContext } from '../../workflow.ts';
import { modelStep, type ModelStepOptions } from './model-step.ts';
import type { GenerateResult, LanguageModelV3, StreamPart, Usage } from './sdk-types.ts';
import type { TokenCounts } from '../metering/usage.ts';

/** The tokens of a provider (v3) usage object. */
export function tokensOfV3(u: Usage | undefined): TokenCounts {
  if (!u) return {};
  return {
    inputTokens: u.inputTokens.total ?? 0,
    outputTokens: u.outputTokens.total ?? 0,
    cachedInputTokens: u.inputTokens.cacheRead ?? 0,
    reasoningTokens: u.outputTokens.reasoning ?? 0,
  };
}

export interface DurableModelOptions extends ModelStepOptions {
  /** The step name of each call (numbered by occurrence). @defaultValue 'model' */
  name?: string;
}

interface StoredStream {
  parts: StreamPart[];
  request?: { body?: unknown };
  response?: { headers?: Record<string, string> };
}

/**
 * `model` with every call a durable step of `ctx`.
 * @example
 * const result = await ai.generateText({ model: durableModel(ctx, model), tools, stopWhen: stepCountIs(8), prompt });
 */
export function durableModel(ctx: WorkflowContext, model: LanguageModelV3, options: DurableModelOptions = {}): LanguageModelV3 {
  const { name = 'model', ...engine } = options;
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      wrapGenerate: ({ params, model: inner }) =>
        modelStep<GenerateResult>(
          ctx,
          name,
          inner.modelId,
          { ...engine, ...(params.maxOutputTokens !== undefined ? { maxOutputTokens: params.maxOutputTokens } : {}), what: `durableModel("${name}")`, input: params.prompt },
          async (io) => {
            const r = await inner.doGenerate({ ...params, abortSignal: io.step.signal, headers: { ...params.headers, ...io.headers } });
            return { value: r, usage: tokensOfV3(r.usage), ...(r.response?.modelId ? { model: r.response.modelId } : {}) };
          },
        ),
      wrapStream: async ({ params, model: inner }) => {
        const stored = await modelStep<StoredStream>(
          ctx,
          name,
          inner.modelId,
          { ...engine, ...(params.maxOutputTokens !== undefined ? { maxOutputTokens: params.maxOutputTokens } : {}), streaming: true, what: `durableModel("${name}")`, input: params.prompt },
          async (io) => {
            const r = await inner.doStream({ ...params, abortSignal: io.step.signal, headers: { ...params.headers, ...io.headers } });
            const parts: StreamPart[] = [];
            let usage: Usage | undefined;
            let modelId: string | undefined;
            const reader = r.stream.getReader();
            try {
              for (;;) {
                const { done, value } = await reader.read();
                if (done) break;
                if (value.type === 'error') throw value.error;
                if (value.type === 'text-delta') io.delta(value.delta);
                if (value.type === 'finish') usage = value.usage;
                if (value.type === 'response-metadata' && value.modelId) modelId = value.modelId;
                parts.push(value);
              }
            } finally {
              reader.releaseLock();
            }
            const value: StoredStream = { parts, ...(r.request ? { request: r.request } : {}), ...(r.response ? { response: r.response as StoredStream['response'] } : {}) };
            return { value, usage: tokensOfV3(usage), ...(modelId ? { model: modelId } : {}) };
          },
        );
        const parts = stored.parts;
        return {
          stream: new ReadableStream<StreamPart>({
            start(controller) {
              for (const p of parts) controller.enqueue(p);
              controller.close();
            },
          }),
          ...(stored.request ? { request: stored.request } : {}),
          ...(stored.response ? { response: stored.response } : {}),
        };
      },
    },
  });
}
