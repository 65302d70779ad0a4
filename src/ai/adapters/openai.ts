/**
 * @module ai/adapters/openai
 * The official `openai` client as a durable step: `chatCompletion(ctx, name, client, body)` runs
 * one chat completion with the client's own retries off (`maxRetries: 0`: the step's retry policy
 * is the only one), the step's AbortSignal (a cancel closes the HTTP connection), the step's
 * idempotency key as the `Idempotency-Key` header, and usage read from the response. With
 * `stream: true` the deltas are published live as the step's stream (`streamEvents`) and the
 * completion is assembled from the chunks (usage included: `stream_options.include_usage` is set),
 * so the step's result has the same shape either way.
 */
import type OpenAI from 'openai';
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionCreateParams, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { WorkflowContext } from '../../workflow.ts';
import { modelStep, type ModelStepOptions } from './model-step.ts';
import type { TokenCounts } from '../metering/usage.ts';

function tokensOf(u: CompletionUsage | null | undefined): TokenCounts {
  if (!u) return {};
  return {
    inputTokens: u.prompt_tokens,
    outputTokens: u.completion_tokens,
    cachedInputTokens: u.prompt_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
  };
}

/** A completion assembled from stream chunks: the first choice's text and tool calls. */
function assemble(chunks: ChatCompletionChunk[], model: string): ChatCompletion {
  let content = '';
  let finish: ChatCompletion.Choice['finish_reason'] = 'stop';
  const calls: ChatCompletionMessageToolCall[] = [];
  let usage: CompletionUsage | undefined;
  for (const c of chunks) {
    if (c.usage) usage = c.usage;
    const choice = c.choices[0];
    if (!choice) continue;
    if (choice.delta.content) content += choice.delta.content;
    for (const t of choice.delta.tool_calls ?? []) {
      const call = (calls[t.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } }) as ChatCompletionMessageToolCall & { type: 'function' };
      if (t.id) call.id = t.id;
      if (t.function?.name) call.function.name += t.function.name;
      if (t.function?.arguments) call.function.arguments += t.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  const first = chunks[0];
  return {
    id: first?.id ?? '',
    object: 'chat.completion',
    created: first?.created ?? 0,
    model: first?.model ?? model,
    choices: [
      {
        index: 0,
        finish_reason: finish,
        logprobs: null,
        message: { role: 'assistant', content: calls.length && !content ? null : content, refusal: null, ...(calls.length ? { tool_calls: calls } : {}) },
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

/**
 * One chat completion as the durable step `name`. Returns the completion (assembled from the
 * chunks when `body.stream` is true).
 * @example
 * const reply = await chatCompletion(ctx, 'draft', client, { model: 'gpt-4o-mini', messages, stream: true });
 * return reply.choices[0]?.message.content;
 */
export function chatCompletion(ctx: WorkflowContext, name: string, client: OpenAI, body: ChatCompletionCreateParams, options: ModelStepOptions = {}): Promise<ChatCompletion> {
  const maxOut = body.max_completion_tokens ?? body.max_tokens ?? undefined;
  return modelStep<ChatCompletion>(
    ctx,
    name,
    body.model,
    {
      ...options,
      ...(typeof maxOut === 'number' ? { maxOutputTokens: maxOut } : {}),
      streaming: body.stream === true,
      what: `chatCompletion("${name}")`,
      input: body.messages,
      request: { ...body, stream: undefined, stream_options: undefined },
    },
    async (io) => {
      const request = { signal: io.step.signal, maxRetries: 0, headers: io.headers };
      if (!body.stream) {
        const completion = await client.chat.completions.create({ ...body, stream: false }, request);
        return { value: completion, usage: tokensOf(completion.usage), model: completion.model };
      }
      const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { ...body.stream_options, include_usage: true } }, request);
      const chunks: ChatCompletionChunk[] = [];
      for await (const chunk of stream) {
        chunks.push(chunk);
        const text = chunk.choices[0]?.delta.content;
        if (text) io.delta(text);
      }
      const completion = assemble(chunks, body.model);
      return { value: completion, usage: tokensOf(completion.usage), model: completion.model };
    },
  );
}
