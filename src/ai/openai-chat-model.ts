/**
 * @module ai/openai-chat-model
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
import type { CallOptions, Content, GenerateResult, LanguageModelV3, Prompt, StreamPart, Usage } from './sdk-types.ts';

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

const textOf = (parts: ReadonlyArray<{ type: string; text?: string }>): string => parts.filter((p) => p.type === 'text').map((p) => p.text ?? '').join('');

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
          p.type === 'tool-call' ? [{ id: p.toolCallId, type: 'function' as const, function: { name: p.toolName, arguments: typeof p.input === 'string' ? p.input : JSON.stringify(p.input) } }] : [],
        );
        const text = textOf(m.content as Array<{ type: string; text?: string }>);
        out.push({ role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length ? { tool_calls: calls } : {}) });
        break;
      }
      case 'tool':
        for (const p of m.content) if (p.type === 'tool-result') out.push({ role: 'tool', tool_call_id: p.toolCallId, content: toolOutputText(p.output as { type: string; value?: unknown }) });
        break;
    }
  }
  return out;
}

function requestBody(modelId: string, o: CallOptions): ChatCompletionCreateParamsBase {
  const tools: ChatCompletionTool[] = (o.tools ?? []).flatMap((t) =>
    t.type === 'function' ? [{ type: 'function' as const, function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.inputSchema as Record<string, unknown> } }] : [],
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
    ...(choice && tools.length
      ? { tool_choice: choice.type === 'tool' ? { type: 'function' as const, function: { name: choice.toolName } } : choice.type }
      : {}),
    ...(o.responseFormat?.type === 'json'
      ? { response_format: o.responseFormat.schema ? { type: 'json_schema' as const, json_schema: { name: o.responseFormat.name ?? 'response', schema: o.responseFormat.schema as Record<string, unknown> } } : { type: 'json_object' as const } }
      : {}),
  };
}

function requestOptions(o: CallOptions): { signal?: AbortSignal; maxRetries: 0; headers?: Record<string, string> } {
  const headers = Object.fromEntries(Object.entries(o.headers ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string'));
  return { maxRetries: 0, ...(o.abortSignal ? { signal: o.abortSignal } : {}), ...(Object.keys(headers).length ? { headers } : {}) };
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
    async doGenerate(o) {
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
    },
    async doStream(o) {
      const body = requestBody(modelId, o);
      const chunks = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, requestOptions(o));
      const iterator = chunks[Symbol.asyncIterator]();
      const calls = new Map<number, { id: string; name: string; args: string }>();
      let textOpen = false;
      let metaSent = false;
      let finish: string | null = null;
      let usage: CompletionUsage | undefined;
      const stream = new ReadableStream<StreamPart>({
        start(controller) {
          controller.enqueue({ type: 'stream-start', warnings: [] });
        },
        // Reads chunks until one of them gives the reader a part (a stream does not pull again
        // after a pull that enqueued nothing).
        async pull(controller) {
          for (;;) {
            const sent = await step(controller);
            if (sent) return;
          }
        },
        async cancel() {
          // The reader stopped (an abort): end the HTTP stream too.
          await iterator.return?.();
        },
      });
      /** Handles one chunk; true if it gave the reader a part or ended the stream. */
      async function step(controller: ReadableStreamDefaultController<StreamPart>): Promise<boolean> {
        let next: IteratorResult<ChatCompletionChunk>;
        try {
          next = await iterator.next();
        } catch (e) {
          controller.error(e);
          return true;
        }
        if (next.done) {
          if (textOpen) controller.enqueue({ type: 'text-end', id: 'text' });
          for (const c of calls.values()) {
            controller.enqueue({ type: 'tool-input-end', id: c.id });
            controller.enqueue({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.args });
          }
          controller.enqueue({ type: 'finish', finishReason: finishOf(finish), usage: usageOf(usage) });
          controller.close();
          return true;
        }
        let sent = false;
        const send = (part: StreamPart): void => {
          controller.enqueue(part);
          sent = true;
        };
        const chunk = next.value;
        if (!metaSent) {
          metaSent = true;
          send({ type: 'response-metadata', id: chunk.id, modelId: chunk.model, timestamp: new Date(chunk.created * 1000) });
        }
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) return sent;
        if (choice.delta.content) {
          if (!textOpen) send({ type: 'text-start', id: 'text' });
          textOpen = true;
          send({ type: 'text-delta', id: 'text', delta: choice.delta.content });
        }
        for (const t of choice.delta.tool_calls ?? []) {
          let call = calls.get(t.index);
          if (!call) {
            call = { id: t.id ?? `call-${t.index}`, name: t.function?.name ?? '', args: '' };
            calls.set(t.index, call);
            send({ type: 'tool-input-start', id: call.id, toolName: call.name });
          }
          if (t.function?.arguments) {
            call.args += t.function.arguments;
            send({ type: 'tool-input-delta', id: call.id, delta: t.function.arguments });
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
        return sent;
      }
      return { stream, request: { body } };
    },
  };
}
