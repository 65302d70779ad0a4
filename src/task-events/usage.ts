/**
 * @module task-events/usage
 * What one model call used, as the `usage:attempt` entry of a task's log records it (pricing and
 * the per-task summary are in ai/usage.ts).
 */

/** Tokens of one call (all optional: providers report what they know). */
export interface TokenCounts {
  inputTokens?: number;
  outputTokens?: number;
  /** Of the input: tokens served from the provider's prompt cache. */
  cachedInputTokens?: number;
  /** Of the output: reasoning tokens. */
  reasoningTokens?: number;
}

/** How an attempt ended. `interrupted`: its process died during the call (found on resume). */
export type AttemptOutcome = 'succeeded' | 'failed' | 'cancelled' | 'interrupted';

/** One attempt of a model call, as recorded in the task's log (`usage:attempt`). */
export interface AttemptUsage extends Required<TokenCounts> {
  step: string;
  /** 1, 2, … per step, counting every attempt that reached the provider (interrupted ones too). */
  attempt: number;
  model: string;
  outcome: AttemptOutcome;
  costUsd: number;
  /** Whether the model was in the price table. */
  priced: boolean;
  /** Counts are estimates (a cut-off stream: output from the characters received, ~4 per token). */
  estimated: boolean;
  /** The error of a failed attempt, in short. */
  error?: string;
}
