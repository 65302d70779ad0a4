/**
 * @module ai/adapters/model-step
 * Internal: not part of the public API.
 * The one way `stepwise-engine/ai` calls a model: as a durable step (`ctx.step`), so a finished
 * call is checkpointed and a resumed task never pays for it again. Each attempt gets the step's
 * AbortSignal and its idempotency key (as the `Idempotency-Key` request header), is metered
 * (see `meter.ts`: budget checked before, usage recorded after, failed and cancelled attempts
 * included), and its provider error classified for the engine's retries (`provider-errors.ts`).
 * The stored result keeps its Dates (`json-dates.ts`).
 */
import { InvalidArgumentError, isStepwiseError } from '../../errors.ts';
import { runOf } from '../../run/run-of.ts';
import type { StepContext, StepOptions, WorkflowContext } from '../../workflow.ts';
import { fromFaithful, toFaithful, type Faithful } from './json-dates.ts';
import { meterOf } from '../metering/meter.ts';
import { classifyProviderError } from './provider-errors.ts';
import { estimateTokens, type PriceTable, type TokenCounts } from '../metering/usage.ts';
import { openStream, type StreamWriter } from '../metering/stream-chunks.ts';
import { usedTokens, withRateLimit, type ModelRateLimit } from './rate-estimate.ts';
import { fingerprintOf } from './fingerprint.ts';

/** Options every model step takes beside the SDK's own. */
export interface ModelStepOptions {
  /** The step's retry policy and per-attempt timeout (see `ctx.step`). */
  step?: StepOptions;
  /** Prices for this call's model, over the workflow's and {@link DEFAULT_PRICES}. */
  prices?: PriceTable;
  /**
   * A rate limit of the engine (`new Engine({ rateLimits })`) each attempt draws on: the limit's
   * name, or `{ name, key }`. The draw takes one request and the call's expected tokens (the
   * prompt's, estimated at 4 characters a token, plus `maxOutputTokens`, or 1024 when unset,
   * capped at the limit), and is settled to the real usage after the call. See docs/rate-limits.md.
   * @example { rateLimit: { name: 'openai', key: input.tenant } }
   */
  rateLimit?: ModelRateLimit;
}

/** What one attempt hands its call. */
export interface AttemptIO {
  step: StepContext;
  /** Headers to send: the step's idempotency key. */
  headers: Record<string, string>;
  /** Streaming calls report each text delta (published live; counted if the attempt is cut off). */
  delta(text: string): void;
}

/** What a call returns: its value, its usage, and the model that served it. */
export interface CallResult<T> {
  value: T;
  usage: TokenCounts;
  model?: string;
}

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** Set on an error a call throws after spending tokens it knows of (repairs that failed): billed as such. */
export const SPENT: unique symbol = Symbol('stepwise.ai.spent') as never;

/** `error` carrying the tokens its call spent. */
export function withSpent<E extends object>(error: E, tokens: TokenCounts): E {
  (error as { [SPENT]?: TokenCounts })[SPENT] = tokens;
  return error;
}

export function contextRun(ctx: WorkflowContext, what: string): NonNullable<ReturnType<typeof runOf>> {
  const run = typeof ctx === 'object' && ctx !== null ? runOf(ctx) : undefined;
  if (!run) throw new InvalidArgumentError(`${what}: the first argument must be the workflow's ctx.`);
  return run;
}

/** What a model step is told besides its call. */
export type ModelStepCall<T> = ModelStepOptions & {
  maxOutputTokens?: number;
  streaming?: boolean;
  what: string;
  /** What the call sends (its prompt and messages): the rate limit's token estimate is made from it. */
  input?: unknown;
  /**
   * Everything that decides the call's answer (prompt or messages, tools, schema, settings; the
   * model object left out): its fingerprint is recorded with the result. @defaultValue `input`
   */
  request?: unknown;
  /**
   * The result made of a value given in place of a call: a skipped step's `fallback`, or an
   * output a person supplied when the step asked (`onExhausted`). Without it the value is
   * handed back as it is.
   */
  given?: (value: unknown) => T;
};

/**
 * Runs `call` as step `name` of `ctx` for model `model` (the id the price table knows). With
 * `streaming`, the attempt's deltas are published as the step's stream (see `stream-chunks.ts`).
 */
export async function modelStep<T>(ctx: WorkflowContext, name: string, model: string, options: ModelStepCall<T>, call: (io: AttemptIO) => Promise<CallResult<T>>): Promise<T> {
  const run = contextRun(ctx, options.what);
  if (typeof name !== 'string' || !name) throw new InvalidArgumentError(`${options.what}: the step name must be a non-empty string.`);
  const fingerprint = fingerprintOf(model, options.request ?? options.input);
  const call$ = ctx.step(
    name,
    async (s): Promise<Faithful & { fingerprint: string }> => {
      const meter = meterOf(run);
      const attempt = await meter.begin(s.stepName, model, {
        ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
        ...(options.prices ? { prices: options.prices } : {}),
      });
      let streamed = '';
      const stream: StreamWriter | null = options.streaming ? openStream(run, s.stepName, attempt) : null;
      const io: AttemptIO = {
        step: s,
        headers: { [IDEMPOTENCY_HEADER]: s.idempotencyKey },
        delta(text) {
          if (!text) return;
          streamed += text;
          stream?.write(text);
        },
      };
      const prices = options.prices ? { prices: options.prices } : {};
      let result: CallResult<T>;
      try {
        result = await call(io);
        // A stream the abort cut short ends quietly in some SDKs: not a result (see step-attempt.ts).
        if (s.signal.aborted) throw s.signal.reason;
      } catch (raw) {
        const spentNow = typeof raw === 'object' && raw !== null ? (raw as { [SPENT]?: TokenCounts })[SPENT] : undefined;
        if (spentNow) await s.rateLimit?.settle(usedTokens(spentNow));
        // Told to stop (a cancel, a worker stopping), not timed out: the attempt was cancelled.
        const cancelled = s.signal.aborted && !(isStepwiseError(s.signal.reason) && s.signal.reason.code === 'STEP_TIMEOUT');
        const error = classifyProviderError(raw, s.signal);
        await stream?.close();
        const spent = typeof raw === 'object' && raw !== null ? (raw as { [SPENT]?: TokenCounts })[SPENT] : undefined;
        await meter.end(s.stepName, attempt, model, cancelled ? 'cancelled' : 'failed', spent ?? { outputTokens: estimateTokens(streamed) }, {
          estimated: !spent && streamed.length > 0,
          error: error instanceof Error ? error.message.slice(0, 300) : String(error),
          ...prices,
        });
        throw error;
      }
      await s.rateLimit?.settle(usedTokens(result.usage));
      await stream?.finish();
      await meter.end(s.stepName, attempt, result.model ?? model, 'succeeded', result.usage, prices);
      return { ...toFaithful(result.value), fingerprint };
    },
    withRateLimit(run, options.step, options.rateLimit, options.input, options.maxOutputTokens),
  );
  // The call's step id (its position is taken as the call is made): `name`, or `name#2` for the second.
  const occurrence = run.occurrence(name);
  const stored = await call$;
  if (!isFaithful(stored)) return options.given ? options.given(stored) : (stored as T);
  if (typeof stored.fingerprint === 'string' && stored.fingerprint !== fingerprint)
    reportDrift(run, occurrence === 1 ? name : `${name}#${occurrence}`, model, stored.fingerprint, fingerprint);
  return fromFaithful<T>(stored);
}

/**
 * A recorded answer of a call the code now makes differently (another fingerprint): the answer is
 * kept, and the worker's listeners are told (`model:drift`).
 */
function reportDrift(run: NonNullable<ReturnType<typeof runOf>>, step: string, model: string, recorded: string, current: string): void {
  run.deps.emit('model:drift', { taskId: run.taskId, step, model, recordedFingerprint: recorded, fingerprint: current });
}

/** Whether a step's output is a stored call result (`toFaithful`, with its fingerprint since it is recorded), not a value given in its place. */
function isFaithful(v: unknown): v is Faithful & { fingerprint?: string } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  const fingerprinted = keys.length === 3 && typeof (v as { fingerprint?: unknown }).fingerprint === 'string';
  return (keys.length === 2 || fingerprinted) && 'value' in v && Array.isArray((v as { dates?: unknown }).dates);
}
