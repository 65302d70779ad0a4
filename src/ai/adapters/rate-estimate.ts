/**
 * @module ai/adapters/rate-estimate
 * Internal: not part of the public API.
 * What a model step draws on its rate limit (`rateLimit` of the model helpers) before the call,
 * and what it settles after. The estimate, drawn before each attempt: the prompt's tokens (its
 * system text, prompt and messages as JSON, one token per 4 characters, as the usage meter
 * estimates a cut-off stream) plus `maxOutputTokens` (or {@link DEFAULT_OUTPUT_ESTIMATE} when the
 * call sets none), capped at the limit's tokens per window. After the call the draw is settled to
 * the call's real usage (input + output tokens), so the window counts what the provider counted;
 * an attempt that failed without reporting usage keeps its estimate.
 */
import type { StepOptions } from '../../workflow.ts';
import type { Run } from '../../run/run.ts';
import '../../rate-limits/step-draw.ts';
import { estimateTokens, type TokenCounts } from '../metering/usage.ts';

/** The rate limit a model helper draws on: a limit's name, or the name with a key (its own window per key). */
export type ModelRateLimit = string | { name: string; key?: string };

/** The output tokens assumed for a call that sets no `maxOutputTokens`. */
export const DEFAULT_OUTPUT_ESTIMATE = 1024;

/** The tokens a call is expected to take: its prompt's, estimated, and its most output. */
export function expectedTokens(input: unknown, maxOutputTokens: number | undefined): number {
  let text = '';
  try {
    text = typeof input === 'string' ? input : (JSON.stringify(input) ?? '');
  } catch {
    text = '';
  }
  return estimateTokens(text) + (maxOutputTokens ?? DEFAULT_OUTPUT_ESTIMATE);
}

/** The step options of a model call with a rate limit: the limit, its key, and the expected tokens. */
export function withRateLimit(run: Run, step: StepOptions | undefined, limit: ModelRateLimit | undefined, input: unknown, maxOutputTokens: number | undefined): StepOptions | undefined {
  if (limit === undefined) return step;
  const { name, key } = typeof limit === 'string' ? { name: limit, key: undefined } : limit;
  const cap = typeof name === 'string' ? run.deps.rateLimits?.get(name)?.tokens : undefined;
  const expected = expectedTokens(input, maxOutputTokens);
  const tokens = cap === null || cap === undefined ? expected : Math.min(expected, cap);
  return { ...step, rateLimit: { name, ...(key !== undefined ? { key } : {}), tokens } };
}

/** The tokens a call used, as its draw is settled to. */
export function usedTokens(t: TokenCounts): number {
  return (t.inputTokens ?? 0) + (t.outputTokens ?? 0);
}
