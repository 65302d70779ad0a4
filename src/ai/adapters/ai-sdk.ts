/**
 * @module ai/adapters/ai-sdk
 * The AI SDK (`ai` 6) as durable steps: `generateText`, `streamText` and `generateObject` with the
 * workflow's `ctx` and a step name first. Each call is one step (see `model-step.ts`): the SDK
 * runs with `maxRetries: 0`, the step's AbortSignal and its idempotency key as a request header;
 * the result (text, tool calls and results, usage, response metadata) is checkpointed, so a
 * resumed task never pays for a finished call. A tool loop inside one `generateText` call is one
 * step; to make each model call of a loop its own step, use {@link durableModel}.
 */
import * as ai from 'ai';
import { NonRetryableError } from '../../errors.ts';
import type { WorkflowContext } from '../../workflow.ts';
import { modelStep, withSpent, type ModelStepOptions } from './model-step.ts';
import type { TokenCounts } from '../metering/usage.ts';

type Usage = ai.LanguageModelUsage;

/** The tokens of an SDK usage object. */
export function tokensOfUsage(u: Usage | undefined): TokenCounts {
  if (!u) return {};
  return {
    inputTokens: u.inputTokens ?? 0,
    outputTokens: u.outputTokens ?? 0,
    cachedInputTokens: u.inputTokenDetails?.cacheReadTokens ?? u.cachedInputTokens ?? 0,
    reasoningTokens: u.outputTokenDetails?.reasoningTokens ?? u.reasoningTokens ?? 0,
  };
}

/** The id the price table knows a model by. */
export function modelIdOf(model: ai.LanguageModel): string {
  return typeof model === 'string' ? model : model.modelId;
}

/** What the SDK controls per attempt and the engine sets: not options of these calls. */
type EngineSet = 'abortSignal' | 'maxRetries';

export type GenerateTextOptions<TOOLS extends ai.ToolSet> = Omit<Parameters<typeof ai.generateText<TOOLS>>[0], EngineSet> & ModelStepOptions;
export type StreamTextOptions<TOOLS extends ai.ToolSet> = Omit<Parameters<typeof ai.streamText<TOOLS>>[0], EngineSet> & ModelStepOptions;

/** What a durable text call returns: the SDK's result, as the journal stores it. */
export interface DurableTextResult<TOOLS extends ai.ToolSet> {
  text: string;
  reasoningText: string | undefined;
  toolCalls: Array<ai.TypedToolCall<TOOLS>>;
  toolResults: Array<ai.TypedToolResult<TOOLS>>;
  finishReason: ai.FinishReason;
  /** The last model call's usage. */
  usage: Usage;
  /** Every model call of the loop, summed. */
  totalUsage: Usage;
  response: { id: string; modelId: string; timestamp: Date; messages: ai.ModelMessage[] };
  /** One entry per model call of the loop. */
  steps: Array<{ text: string; finishReason: ai.FinishReason; usage: Usage; toolCalls: Array<ai.TypedToolCall<TOOLS>>; toolResults: Array<ai.TypedToolResult<TOOLS>> }>;
}

type SdkTextResult<TOOLS extends ai.ToolSet> = Pick<
  ai.GenerateTextResult<TOOLS, never>,
  'text' | 'reasoningText' | 'toolCalls' | 'toolResults' | 'finishReason' | 'usage' | 'totalUsage' | 'response' | 'steps'
>;

function durableTextResult<TOOLS extends ai.ToolSet>(r: SdkTextResult<TOOLS>): DurableTextResult<TOOLS> {
  return {
    text: r.text,
    reasoningText: r.reasoningText,
    toolCalls: r.toolCalls,
    toolResults: r.toolResults,
    finishReason: r.finishReason,
    usage: r.usage,
    totalUsage: r.totalUsage,
    response: { id: r.response.id, modelId: r.response.modelId, timestamp: r.response.timestamp, messages: r.response.messages },
    steps: r.steps.map((s) => ({ text: s.text, finishReason: s.finishReason, usage: s.usage, toolCalls: s.toolCalls, toolResults: s.toolResults })),
  };
}

/**
 * The result as the journal keeps it: the reply once. The SDK repeats the final text in the last
 * loop step's `text` and in the assistant message's text part of `response.messages`; those
 * copies are left out (a text part without `text`, a last step without it) and put back by
 * {@link unpackTextResult}, which leaves results recorded whole as they are.
 */
function packTextResult<TOOLS extends ai.ToolSet>(r: DurableTextResult<TOOLS>): DurableTextResult<TOOLS> {
  const last = r.steps.length - 1;
  const steps = r.steps.map((s, i) => (i === last && s.text === r.text ? (({ text: _, ...rest }) => rest)(s) : s));
  const messages = r.response.messages.map((m) =>
    m.role === 'assistant' && Array.isArray(m.content) ? { ...m, content: m.content.map((p) => (p.type === 'text' && p.text === r.text ? (({ text: _, ...rest }) => rest)(p) : p)) } : m,
  );
  return { ...r, steps: steps as typeof r.steps, response: { ...r.response, messages: messages as ai.ModelMessage[] } };
}

function unpackTextResult<TOOLS extends ai.ToolSet>(r: DurableTextResult<TOOLS>): DurableTextResult<TOOLS> {
  if (typeof r !== 'object' || r === null || !Array.isArray(r.steps) || !Array.isArray(r.response?.messages)) return r;
  const steps = r.steps.map((s) => (typeof s.text === 'string' ? s : { ...s, text: r.text }));
  const messages = r.response.messages.map((m) =>
    m.role === 'assistant' && Array.isArray(m.content) ? { ...m, content: m.content.map((p) => (p.type === 'text' && typeof p.text !== 'string' ? { ...p, text: r.text } : p)) } : m,
  );
  return { ...r, steps, response: { ...r.response, messages: messages as ai.ModelMessage[] } };
}

function split<O extends ModelStepOptions>(options: O): [Omit<O, keyof ModelStepOptions>, ModelStepOptions & { input?: unknown; request: unknown }] {
  const { step, prices, rateLimit, ...rest } = options;
  const input = { system: (rest as { system?: unknown }).system, prompt: (rest as { prompt?: unknown }).prompt, messages: (rest as { messages?: unknown }).messages };
  // What decides the answer: every SDK option but the model object (its id is fingerprinted).
  const { model: _model, ...request } = rest as Record<string, unknown>;
  return [rest, { ...(step ? { step } : {}), ...(prices ? { prices } : {}), ...(rateLimit !== undefined ? { rateLimit, input } : {}), request }];
}

/**
 * `generateText` as the durable step `name`.
 * @example
 * const { text, totalUsage } = await generateText(ctx, 'summarise', { model, prompt: `Summarise: ${doc}` });
 */
export function generateText<TOOLS extends ai.ToolSet = ai.ToolSet>(ctx: WorkflowContext, name: string, options: GenerateTextOptions<TOOLS>): Promise<DurableTextResult<TOOLS>> {
  const [sdk, engine] = split(options);
  const model = modelIdOf(sdk.model);
  return modelStep(ctx, name, model, { ...engine, ...(sdk.maxOutputTokens !== undefined ? { maxOutputTokens: sdk.maxOutputTokens } : {}), what: `generateText("${name}")` }, async (io) => {
    const r = await ai.generateText<TOOLS>({
      ...(sdk as Parameters<typeof ai.generateText<TOOLS>>[0]),
      abortSignal: io.step.signal,
      maxRetries: 0,
      headers: { ...sdk.headers, ...io.headers },
    });
    return { value: packTextResult(durableTextResult(r)), usage: tokensOfUsage(r.totalUsage), model: r.response.modelId };
  }).then(unpackTextResult);
}

/**
 * `streamText` as the durable step `name`: the text deltas are published live as the step's
 * stream (read them with `streamEvents`, from any process; `onDelta` sees them in this one), and
 * the finished result is checkpointed like `generateText`'s.
 * @example
 * const { text } = await streamText(ctx, 'draft', { model, prompt, onDelta: (d) => process.stdout.write(d) });
 */
export function streamText<TOOLS extends ai.ToolSet = ai.ToolSet>(
  ctx: WorkflowContext,
  name: string,
  options: StreamTextOptions<TOOLS> & { onDelta?: (delta: string) => void },
): Promise<DurableTextResult<TOOLS>> {
  const { onDelta, ...rest } = options;
  const [sdk, engine] = split(rest);
  const model = modelIdOf(sdk.model);
  return modelStep(
    ctx,
    name,
    model,
    { ...engine, ...(sdk.maxOutputTokens !== undefined ? { maxOutputTokens: sdk.maxOutputTokens } : {}), streaming: true, what: `streamText("${name}")` },
    async (io) => {
      const r = ai.streamText<TOOLS>({
        ...(sdk as Parameters<typeof ai.streamText<TOOLS>>[0]),
        abortSignal: io.step.signal,
        maxRetries: 0,
        headers: { ...sdk.headers, ...io.headers },
        // Errors come through the stream below; the SDK's default would also log them.
        onError: () => undefined,
      });
      for await (const part of r.fullStream) {
        if (part.type === 'text-delta') {
          io.delta(part.text);
          onDelta?.(part.text);
        } else if (part.type === 'error') throw part.error;
      }
      const [text, reasoningText, toolCalls, toolResults, finishReason, usage, totalUsage, response, steps] = await Promise.all([
        r.text,
        r.reasoningText,
        r.toolCalls,
        r.toolResults,
        r.finishReason,
        r.usage,
        r.totalUsage,
        r.response,
        r.steps,
      ]);
      const value = packTextResult(durableTextResult<TOOLS>({ text, reasoningText, toolCalls, toolResults, finishReason, usage, totalUsage, response, steps } as SdkTextResult<TOOLS>));
      return { value, usage: tokensOfUsage(totalUsage), model: response.modelId };
    },
  ).then(unpackTextResult);
}

/** Options of {@link generateObject}. */
export interface GenerateObjectOptions<T> extends ModelStepOptions {
  model: ai.LanguageModel;
  /** A zod schema (or any schema the AI SDK takes). */
  schema: ai.FlexibleSchema<T>;
  system?: string;
  prompt?: string;
  messages?: ai.ModelMessage[];
  maxOutputTokens?: number;
  temperature?: number;
  headers?: Record<string, string>;
  /**
   * Repair attempts within one step attempt: an object that fails the schema (or is not JSON) is
   * sent back to the model with the validation issues, up to `maxAttempts` times, before the step
   * fails (NonRetryableError: repeating the same prompt would fail the same way). Then the step's
   * `onExhausted` applies (`step: { onExhausted: 'skip', fallback }` or `'ask'`): a fallback or an
   * output a person supplies is the `object` of the result. Every repair is billed in the
   * attempt's usage. @defaultValue { maxAttempts: 2 }
   */
  repair?: { maxAttempts?: number };
}

export interface DurableObjectResult<T> {
  object: T;
  /** Repairs it took (0: the first answer was valid). */
  repairs: number;
  finishReason: ai.FinishReason;
  /** All calls of the step attempt, repairs included, summed. */
  usage: TokenCounts;
  response: { id: string; modelId: string; timestamp: Date };
}

function issuesOf(e: unknown): string {
  const cause = (e as { cause?: unknown }).cause;
  const inner = (cause as { cause?: { issues?: Array<{ path?: unknown[]; message: string }> } } | undefined)?.cause ?? (cause as { issues?: unknown } | undefined);
  const issues = (inner as { issues?: Array<{ path?: unknown[]; message: string }> } | undefined)?.issues;
  if (Array.isArray(issues) && issues.length) return issues.map((i) => `${(i.path ?? []).join('.') || '(root)'}: ${i.message}`).join('; ');
  return cause instanceof Error ? cause.message : e instanceof Error ? e.message : String(e);
}

const addTokens = (a: TokenCounts, b: TokenCounts): TokenCounts => ({
  inputTokens: (a.inputTokens ?? 0) + (b.inputTokens ?? 0),
  outputTokens: (a.outputTokens ?? 0) + (b.outputTokens ?? 0),
  cachedInputTokens: (a.cachedInputTokens ?? 0) + (b.cachedInputTokens ?? 0),
  reasoningTokens: (a.reasoningTokens ?? 0) + (b.reasoningTokens ?? 0),
});

/**
 * A structured object (validated by `schema`) as the durable step `name`, with repair attempts
 * that feed the validation issues back to the model (see {@link GenerateObjectOptions.repair}).
 * @example
 * const { object } = await generateObject(ctx, 'extract', { model, schema: z.object({ title: z.string() }), prompt });
 */
export function generateObject<T>(ctx: WorkflowContext, name: string, options: GenerateObjectOptions<T>): Promise<DurableObjectResult<T>> {
  const { step, prices, repair, model, schema, system, prompt, messages, maxOutputTokens, temperature, headers, rateLimit } = options;
  const maxRepairs = repair?.maxAttempts ?? 2;
  const limited = rateLimit !== undefined ? { rateLimit, input: { system, prompt, messages } } : {};
  const engine: ModelStepOptions & { input?: unknown; request: unknown } = {
    ...(step ? { step } : {}),
    ...(prices ? { prices } : {}),
    ...limited,
    request: { schema, system, prompt, messages, maxOutputTokens, temperature },
  };
  // A fallback or a supplied output is the object itself: no call was made, so nothing was spent.
  const given = (object: unknown): DurableObjectResult<T> => ({
    object: object as T,
    repairs: 0,
    finishReason: 'other',
    usage: {},
    response: { id: '', modelId: modelIdOf(model), timestamp: new Date(0) },
  });
  return modelStep(ctx, name, modelIdOf(model), { ...engine, ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}), what: `generateObject("${name}")`, given }, async (io) => {
    let conversation: ai.ModelMessage[] = messages ?? [{ role: 'user', content: prompt ?? '' }];
    let used: TokenCounts = {};
    for (let repairs = 0; ; repairs++) {
      try {
        const r = await ai.generateObject({
          model,
          schema,
          messages: conversation,
          maxRetries: 0,
          abortSignal: io.step.signal,
          headers: { ...headers, ...io.headers },
          ...(system !== undefined ? { system } : {}),
          ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
          ...(temperature !== undefined ? { temperature } : {}),
        } as Parameters<typeof ai.generateObject>[0]);
        used = addTokens(used, tokensOfUsage(r.usage));
        const value: DurableObjectResult<T> = {
          object: r.object as T,
          repairs,
          finishReason: r.finishReason,
          usage: used,
          response: { id: r.response.id, modelId: r.response.modelId, timestamp: r.response.timestamp },
        };
        return { value, usage: used, model: r.response.modelId };
      } catch (e) {
        if (!ai.NoObjectGeneratedError.isInstance(e)) throw e;
        used = addTokens(used, tokensOfUsage(e.usage));
        const issues = issuesOf(e);
        if (repairs >= maxRepairs) {
          throw withSpent(
            new NonRetryableError(`generateObject("${name}"): the model's object still failed the schema after ${repairs} repair${repairs === 1 ? '' : 's'}: ${issues}`, { cause: e }),
            used,
          );
        }
        conversation = [
          ...conversation,
          { role: 'assistant', content: e.text ?? '' },
          { role: 'user', content: `That answer does not match the required JSON schema: ${issues}. Reply again with only the corrected JSON object.` },
        ];
      }
    }
  });
}
