/**
 * @module ai/adapters/openai-chat-model
 * An AI SDK language model (specification v3) over the official `openai` client's chat
 * completions API: `openaiChatModel(client, 'gpt-4o-mini')` works with `generateText`,
 * `streamText`, tools and `durableModel`, against OpenAI or any OpenAI-compatible server (a local
 * one, a gateway) reached through the client's `baseURL`. It maps the SDK's prompt (system, user,
 * assistant with tool calls, tool results) and function tools to the chat format, and the reply
 * (text, tool calls, finish reason, usage with cached and reasoning tokens, response id, model
 * and timestamp) back. The client's own retries are off (`maxRetries: 0`): retries are the
 * engine's. A provider package (`@ai-sdk/openai`) works as well wherever this one is used.
 */
import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsBase, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { CallOptions, Content, GenerateResult, LanguageModelV3, Prompt, StreamPart, StreamResult, Usage } from './sdk-types.ts';

type FinishReason = GenerateResult['finishReason'];

function finishOf(raw: string | null | undefined): FinishReason {
  const unified: FinishReason['unified'] =
    raw === 'stop' ? 'stop' : raw === 'length' ? 'length' : raw === 'tool_calls' || raw === 'function_call' ? 'tool-calls' : raw === 'content_filter' ? 'content-filter' : 'other';
  return { unified, raw: raw ?? undefined };
}

function usageOf(u: CompletionUsage | null | undefined): Usage {
  const cached = u?.prompt_tokens_details?.cached_tokens;
  const reasoning = u?.completion_tokens_details?.reasoning_tokens;
  return {
    inputTokens: { total: u?.prompt_tokens, noCache: u ? u.prompt_tokens - (cached ?? 0) : undefined, cacheRead: cached, cacheWrite: undefined },
    outputTokens: { total: u?.completion_tokens, text: u ? u.completion_tokens - (reasoning ?? 0) : undefined, reasoning },
    ...(u ? { raw: u as unknown as Record<string, never> } : {}),
  } as Usage;
}

const textOf = (parts: ReadonlyArray<{ type: string; text?: string }>): string =>
  parts
    .filter((p) => p.type === 'text')
    .map((p) => p.text ?? '')
    .join('');

function toolOutputText(output: { type: string; value?: unknown }): string {
  if (output.type === 'text' || output.type === 'error-text') return String(output.value ?? '');
  if (output.type === 'execution-denied') return 'Tool execution denied.';
  return JSON.stringify(output.value ?? null);
}

/** The SDK's prompt as chat messages. */
export function toChatMessages(prompt: Prompt): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  for (const m of prompt) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        out.push({ role: 'user', content: textOf(m.content as Array<{ type: string; text?: string }>) });
        break;
      case 'assistant': {
        const calls = m.content.flatMap((p) =>
          p.type === 'tool-call'
            ? [{ id: p.toolCallId, type: 'function' as const, function: { name: p.toolName, arguments: typeof p.input === 'string' ? p.input : JSON.stringify(p.input) } }]
            : [],
        );
        const text = textOf(m.content as Array<{ type: string; text?: string }>);
        out.push({ role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length ? { tool_calls: calls } : {}) });
        break;
      }
      case 'tool':
        for (const p of m.content)
          if (p.type === 'tool-result') out.push({ role: 'tool', tool_call_id: p.toolCallId, content: toolOutputText(p.output as { type: string; value?: unknown }) });
        break;
    }
  }
  return out;
}

function requestBody(modelId: string, o: CallOptions): ChatCompletionCreateParamsBase {
  const tools: ChatCompletionTool[] = (o.tools ?? []).flatMap((t) =>
    t.type === 'function'
      ? [{ type: 'function' as const, function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.inputSchema as Record<string, unknown> } }]
      : [],
  );
  const choice = o.toolChoice;
  return {
    model: modelId,
    messages: toChatMessages(o.prompt),
    ...(o.maxOutputTokens !== undefined ? { max_completion_tokens: o.maxOutputTokens } : {}),
    ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
    ...(o.topP !== undefined ? { top_p: o.topP } : {}),
    ...(o.stopSequences?.length ? { stop: o.stopSequences } : {}),
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(tools.length ? { tools } : {}),
    ...(choice && tools.length ? { tool_choice: choice.type === 'tool' ? { type: 'function' as const, function: { name: choice.toolName } } : choice.type } : {}),
    ...(o.responseFormat?.type === 'json'
      ? {
          response_format: o.responseFormat.schema
            ? { type: 'json_schema' as const, json_schema: { name: o.responseFormat.name ?? 'response', schema: o.responseFormat.schema as Record<string, unknown> } }
            : { type: 'json_object' as const },
        }
      : {}),
  };
}

function requestOptions(o: CallOptions): { signal?: AbortSignal; maxRetries: 0; headers?: Record<string, string> } {
  const headers = Object.fromEntries(Object.entries(o.headers ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string'));
  return { maxRetries: 0, ...(o.abortSignal ? { signal: o.abortSignal } : {}), ...(Object.keys(headers).length ? { headers } : {}) };
}

/** `doGenerate`: one chat completion, its reply as the SDK's content, finish reason and usage. */
async function generate(client: OpenAI, modelId: string, o: CallOptions): Promise<GenerateResult> {
  const body = requestBody(modelId, o);
  const r = await client.chat.completions.create({ ...body, stream: false }, requestOptions(o));
  const choice = r.choices[0];
  const content: Content[] = [];
  if (choice?.message.content) content.push({ type: 'text', text: choice.message.content });
  for (const c of choice?.message.tool_calls ?? []) {
    if (c.type === 'function') content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.function.name, input: c.function.arguments });
  }
  return {
    content,
    finishReason: finishOf(choice?.finish_reason),
    usage: usageOf(r.usage),
    request: { body },
    response: { id: r.id, modelId: r.model, timestamp: new Date(r.created * 1000) },
    warnings: [],
  };
}

/** What a stream has seen so far: whether text is open, the tool calls being assembled, how it finished. */
interface StreamState {
  textOpen: boolean;
  metaSent: boolean;
  finish: string | null;
  usage: CompletionUsage | undefined;
  calls: Map<number, { id: string; name: string; args: string }>;
}

/** The parts one chunk gives the reader (none for a chunk that only carries usage, say). */
function chunkParts(s: StreamState, chunk: ChatCompletionChunk): StreamPart[] {
  const parts: StreamPart[] = [];
  if (!s.metaSent) {
    s.metaSent = true;
    parts.push({ type: 'response-metadata', id: chunk.id, modelId: chunk.model, timestamp: new Date(chunk.created * 1000) });
  }
  if (chunk.usage) s.usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) return parts;
  if (choice.delta.content) {
    if (!s.textOpen) parts.push({ type: 'text-start', id: 'text' });
    s.textOpen = true;
    parts.push({ type: 'text-delta', id: 'text', delta: choice.delta.content });
  }
  for (const t of choice.delta.tool_calls ?? []) {
    let call = s.calls.get(t.index);
    if (!call) {
      call = { id: t.id ?? `call-${t.index}`, name: t.function?.name ?? '', args: '' };
      s.calls.set(t.index, call);
      parts.push({ type: 'tool-input-start', id: call.id, toolName: call.name });
    }
    if (t.function?.arguments) {
      call.args += t.function.arguments;
      parts.push({ type: 'tool-input-delta', id: call.id, delta: t.function.arguments });
    }
  }
  if (choice.finish_reason) s.finish = choice.finish_reason;
  return parts;
}

/** The parts that end the stream: the open text and each assembled tool call, then the finish. */
function endParts(s: StreamState): StreamPart[] {
  const parts: StreamPart[] = [];
  if (s.textOpen) parts.push({ type: 'text-end', id: 'text' });
  for (const c of s.calls.values()) {
    parts.push({ type: 'tool-input-end', id: c.id });
    parts.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.args });
  }
  parts.push({ type: 'finish', finishReason: finishOf(s.finish), usage: usageOf(s.usage) });
  return parts;
}

/** The SDK's stream of parts over the client's stream of chunks. */
function partStream(chunks: AsyncIterable<ChatCompletionChunk>): ReadableStream<StreamPart> {
  const iterator = chunks[Symbol.asyncIterator]();
  const state: StreamState = { textOpen: false, metaSent: false, finish: null, usage: undefined, calls: new Map() };
  return new ReadableStream<StreamPart>({
    start(controller) {
      controller.enqueue({ type: 'stream-start', warnings: [] });
    },
    // Reads chunks until one of them gives the reader a part (a stream does not pull again after
    // a pull that enqueued nothing).
    async pull(controller) {
      for (;;) {
        let next: IteratorResult<ChatCompletionChunk>;
        try {
          next = await iterator.next();
        } catch (e) {
          controller.error(e);
          return;
        }
        const parts = next.done ? endParts(state) : chunkParts(state, next.value);
        for (const part of parts) controller.enqueue(part);
        if (next.done) return controller.close();
        if (parts.length) return;
      }
    },
    async cancel() {
      // The reader stopped (an abort): end the HTTP stream too.
      await iterator.return?.();
    },
  });
}

/** `doStream`: a streamed chat completion (usage included in its last chunk). */
async function stream(client: OpenAI, modelId: string, o: CallOptions): Promise<StreamResult> {
  const body = requestBody(modelId, o);
  const chunks = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, requestOptions(o));
  return { stream: partStream(chunks), request: { body } };
}

/**
 * An AI SDK model over `client`'s chat completions.
 * @example
 * const model = openaiChatModel(new OpenAI({ apiKey: process.env.OPENAI_API_KEY }), 'gpt-4o-mini');
 * const { text } = await generateText(ctx, 'summarise', { model, prompt });
 */
export function openaiChatModel(client: OpenAI, modelId: string): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'openai.chat',
    modelId,
    supportedUrls: {},
    doGenerate: (o) => generate(client, modelId, o),
    doStream: (o) => stream(client, modelId, o),
  };
}
