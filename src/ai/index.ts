/**
 * @module stepwise-engine/ai
 * Model calls as durable steps: the AI SDK (`ai` 6) and the official `openai` client with their own
 * retries off, the step's AbortSignal and idempotency key, usage and cost recorded per attempt
 * (failed, cancelled and interrupted ones too), budgets the engine enforces, and durable streams
 * readable live from any process. `ai` and `openai` are optional peer dependencies: install the
 * one you use.
 *
 * Inside: `metering/` is the engine's own accounting (the per-run usage meter, budgets and budget
 * asks, durable stream chunks), which the engine core uses; `adapters/` are the model steps over
 * the SDKs, built on metering. The core never imports an adapter.
 */

// The official openai client
export { chatCompletion } from './adapters/openai.ts';

// Durable streams
export { streamEvents } from './metering/stream-chunks.ts';
export type { StreamEvent, StreamEventsOptions } from './metering/stream-chunks.ts';

// Options shared by every model step
export type { ModelStepOptions } from './adapters/model-step.ts';
export type { ModelRateLimit } from './adapters/rate-estimate.ts';
export { IDEMPOTENCY_HEADER } from './adapters/model-step.ts';

// Usage, prices, budgets
export { DEFAULT_PRICES, costOf, priceOf } from './metering/usage.ts';
export type { AttemptUsage, AttemptOutcome, UsageTotals, Budget, PriceTable, ModelPrice, TokenCounts } from './metering/usage.ts';
export { retryAfterMs } from './adapters/provider-errors.ts';

// The AI SDK
export { generateText, streamText, generateObject } from './adapters/ai-sdk.ts';
export type { GenerateTextOptions, StreamTextOptions, GenerateObjectOptions, DurableTextResult, DurableObjectResult } from './adapters/ai-sdk.ts';
export { durableModel } from './adapters/durable-model.ts';
export type { DurableModelOptions } from './adapters/durable-model.ts';
export { openaiChatModel } from './adapters/openai-chat-model.ts';

// Chat sessions as durable tasks
export { chatMessages, replyStep, CHAT_MESSAGE_SIGNAL } from './chat/session.ts';
export type { ChatInput, ChatMessage, ChatMessagesOptions } from './chat/session.ts';
