/**
 * @module ai/adapters/sdk-types
 * Internal: not part of the public API.
 * The AI SDK's language-model (v3) types, derived from what the `ai` package itself exports (its
 * middleware type), so that nothing here depends on the SDK's internal packages by name.
 */
import type { LanguageModelMiddleware } from 'ai';

export type LanguageModelV3 = Parameters<NonNullable<LanguageModelMiddleware['wrapGenerate']>>[0]['model'];
export type CallOptions = Parameters<LanguageModelV3['doGenerate']>[0];
export type GenerateResult = Awaited<ReturnType<LanguageModelV3['doGenerate']>>;
export type StreamResult = Awaited<ReturnType<LanguageModelV3['doStream']>>;
export type StreamPart = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;
export type Usage = GenerateResult['usage'];
export type Content = GenerateResult['content'][number];
export type Prompt = CallOptions['prompt'];
