/**
 * @module api/step
 * The public shapes of steps: what a step function receives (`StepContext`), the options of
 * `ctx.step`, `ctx.transaction`, `ctx.forEach` and `ctx.waitForEvent`, and the JSON bound on step
 * outputs. Types only, so that the run kernel and every primitive can name them without
 * depending on one another; re-exported by `workflow.ts` under their public names.
 */
import type { Duration } from '../duration.ts';
import { optionNames } from '../option-keys.ts';
import type { RetryOptions } from '../retry.ts';
import type { FailureKind } from '../serialize.ts';
import type { ApprovalOptions } from './approvals.ts';
import type { RateLimitTicket, StepRateLimit } from './rate-limits.ts';

/** What a long step reports of its progress (all optional): `done` of `total` units, a `note`. */
export interface Progress {
  done?: number;
  total?: number;
  note?: string;
}

/** What a step function receives. */
export interface StepContext {
  /** Fires when the task is cancelled, the step times out, the worker stops or loses its lease. */
  readonly signal: AbortSignal;
  /**
   * Deterministic and versioned: `v1:<taskId>:<step>#<n>`. The same on every attempt, retry and
   * resume of this step; pass it to external APIs so that a repeated call is recognised.
   */
  readonly idempotencyKey: string;
  /** 1 for the first attempt. Counts across resumes of the task. */
  readonly attempt: number;
  /** The error of the previous attempt, so that a retry can repair instead of repeating. */
  readonly lastError: Error | undefined;
  /**
   * The output the previous attempt produced when it was refused (an `OutputInvalidError` from the
   * step's `output` schema, or a `RepairableError` with `output`): re-prompt with it and `lastError`.
   */
  readonly lastOutput: unknown;
  readonly taskId: string;
  /** The step id: the name, with `#n` from its second occurrence on. */
  readonly stepName: string;
  /**
   * The fencing epoch of this run: it grows each time a worker takes the task over. Hand it to a
   * system that can refuse writes from a stale owner (a zombie worker whose lease expired).
   */
  readonly epoch: number;
  /**
   * Reports progress (`{ done, total, note }`): stored on the task for `show`, `ls` and
   * `engine.get()`, at most about once a second, without a journal row.
   */
  readonly progress: (progress: Progress) => void;
  /**
   * The draw this attempt made on the step's rate limit (`rateLimit` option), or undefined for a
   * step without one. A model call settles it with its real token usage.
   */
  readonly rateLimit: RateLimitTicket | undefined;
}

export interface StepOptions {
  /** Retry policy for this step (a number is `maxAttempts`). Defaults to the workflow's, else 3 attempts. */
  retry?: RetryOptions | number;
  /** Per-attempt time limit: the step's signal fires and the attempt fails with StepTimeoutError. */
  timeout?: Duration;
  /**
   * Overrides the engine's classification of a failed attempt: return `'transient'` (retry),
   * `'permanent'` (fail now), `'repair'` (use the repair budget), `{ kind, retryAfterMs }`, or
   * `undefined` for the default (HTTP status, network errors, Retry-After, `retryable`).
   */
  classify?: Classifier;
  /**
   * Repair attempts for business errors (an output that fails `output`, a `RepairableError`),
   * counted apart from `retry`: the next attempt runs at once with `lastError` and `lastOutput`.
   * @defaultValue no repair: such an error fails the step
   */
  repair?: { maxAttempts: number } | number;
  /**
   * A schema the output must match (any Standard Schema: zod 3.24+/4, valibot, arktype). The
   * validated value is what is recorded; an invalid output is an `OutputInvalidError` (repaired per
   * `repair`, then failing the step with the issues attached).
   */
  output?: StandardSchemaLike;
  /**
   * When the step fails for good: `'fail'` hands the code a StepFailedError (the default);
   * `'skip'` records the step as skipped and returns `fallback` instead; `'ask'` parks the task on
   * an approval named `exhausted:<step>` (who decides: `ask`; payload
   * `{ step, attempts, error, actions }`). Approve it with data `{ action: 'supply', output }` (the
   * step's output), `{ action: 'retry' }` (a fresh set of attempts), `{ action: 'skip' }` (its
   * `fallback`; only if declared) or `{ action: 'fail' }`; a rejection (or a timeout that rejects)
   * fails the step. Other data is refused by `engine.decide` (INVALID_ARGUMENT).
   * @example
   * ctx.step('extract', fn, { onExhausted: 'ask', ask: { approvers: ['ops'], timeout: '1d' } })
   * // then: engine.decide(approvalId, { approve: true, by: 'ops', data: { action: 'supply', output: { total: 42 } } })
   */
  onExhausted?: 'fail' | 'skip' | 'ask';
  /** Who decides an exhausted step (`onExhausted: 'ask'`), how long they have, what a timeout does. */
  ask?: Pick<ApprovalOptions, 'approvers' | 'timeout' | 'onTimeout' | 'remindEvery' | 'quorum'>;
  /** The output of a skipped step (`onExhausted: 'skip'`, or a `skip` decision under `'ask'`): JSON data. */
  fallback?: unknown;
  /**
   * Undoes the step (saga): when the task fails for good or is cancelled, the compensations of
   * its completed steps run in reverse order, each as a durable, retried step named
   * `compensate:<step>` that receives the step's output. Make it idempotent (it may run again
   * after a crash); its step context has its own idempotency key.
   */
  compensate?: (output: any, step: StepContext) => unknown; // eslint-disable-line @typescript-eslint/no-explicit-any
  /**
   * A business key: the step's identity comes from the operation, not the task
   * (`'report:2026-12-01:daily'`, or a function of the workflow's input). The step's
   * `idempotencyKey` becomes `v<keyVersion>:<key>`, and its result is kept in an idempotency
   * record under that key: the same operation run again — by a new task too — returns the recorded
   * result instead of running. Digest sensitive parts with `hashKey()`.
   * @example
   * ctx.step('write-report', write, { key: (input: { day: string }) => `report:${input.day}:daily` });
   */
  key?: string | ((input: any) => string); // eslint-disable-line @typescript-eslint/no-explicit-any
  /**
   * The version prefix of a business key. Raise it when the step's meaning changes (it writes other
   * rows, calls another API): old records no longer match and the new meaning runs once afresh.
   * @defaultValue 1
   */
  keyVersion?: number;
  /** How long a business key's record (and so its result) is kept. @defaultValue '30d' */
  keyTtl?: Duration;
  /**
   * `'at-most-once'`: for systems that ignore idempotency keys. The intent of each attempt is
   * recorded before the call; after a crash, an attempt that may have happened is never re-run
   * blindly: `verify` is asked, and an unknown answer parks the task on an approval
   * `effect:<step>` for a person to decide (data `{ action: 'rerun' | 'skip' | 'fail', result }`;
   * `engine.decideEffect` is a shorthand). @defaultValue 'at-least-once'
   */
  effect?: 'at-least-once' | 'at-most-once';
  /** For at-most-once steps: did the interrupted attempt happen? See {@link VerifyAnswer}. */
  verify?: (ctx: VerifyContext) => VerifyAnswer | Promise<VerifyAnswer>;
  /**
   * The step runs only if the task's approval of this name (the latest, if it asked more than once)
   * is approved; otherwise it fails for good with an ApprovalRequiredError (code FORBIDDEN),
   * recorded as the step's failure, whatever path the code took to reach it.
   */
  requires?: string;
  /**
   * A rate limit of the engine (`new Engine({ rateLimits })`) each attempt draws on before it
   * runs: the limit's name, or `{ name, key, tokens, requests }`. When the limit's window is
   * full, the draw is placed when capacity returns and the task parks until then (no worker slot
   * held). A name the engine does not know fails the task (INVALID_ARGUMENT naming the known ones).
   * @example { rateLimit: { name: 'openai', key: input.tenant, tokens: 1200 } }
   */
  rateLimit?: StepRateLimit;
}

export interface TransactionOptions {
  /** Retry policy of a failed attempt (each attempt rolled back first). Defaults to the workflow's, else 3 attempts. */
  retry?: RetryOptions | number;
}

/** The part of the Standard Schema interface Stepwise uses: `~standard.validate`. */
export interface StandardSchemaLike {
  readonly '~standard': {
    readonly validate: (value: unknown) => StandardResult | Promise<StandardResult>;
  };
}

export type StandardResult =
  | { readonly value: unknown; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> };

export interface WaitForEventOptions {
  /** Give up after this long and return `{ timedOut: true }`. Without it, waits until a signal arrives. */
  timeout?: Duration;
}

/** What `waitForEvent` returns: the event that arrived (its name and payload), or a timeout. */
export type EventResult<T> = { timedOut: false; name: string; payload: T } | { timedOut: true };

/** Options of `ctx.forEach`: the chunking, and the step options of every chunk (retry, timeout…). */
export interface ForEachOptions extends Omit<StepOptions, 'compensate' | 'onExhausted' | 'fallback' | 'output'> {
  /** Items per chunk (one checkpoint each). @defaultValue 100 */
  chunkSize?: number;
  /** Items of a chunk in flight at once. @defaultValue 1 */
  concurrency?: number;
}

/**
 * `T` if it is JSON data as a checkpoint stores it, else `never` where TypeScript can tell: a
 * `Date`, `Map`, `Set`, `RegExp`, function, `bigint` or `symbol` anywhere inside (class instances
 * with methods included) would not come back the same from the journal. Used as the bound of step
 * outputs, so such a step is a compile-time error; values TypeScript cannot see into (`any`,
 * `unknown`) are checked at run time (NOT_SERIALIZABLE).
 */
export type JsonSafe<T> = unknown extends T
  ? T
  : T extends string | number | boolean | null | undefined | void
    ? T
    : T extends Date | Map<unknown, unknown> | Set<unknown> | WeakMap<object, unknown> | WeakSet<object> | RegExp | bigint | symbol | ((...args: never[]) => unknown)
      ? never
      : T extends readonly unknown[]
        ? { [K in keyof T]: JsonSafe<T[K]> }
        : { [K in keyof T]: JsonSafe<T[K]> };

/** `unknown` (no constraint) when `T` is JSON-safe, `never` (a type error at the call) when not. */
export type JsonCheck<T> = [T] extends [JsonSafe<T>] ? unknown : never;

/** What `verify` answers about an attempt that may have happened. */
export type VerifyAnswer = { status: 'done'; result?: unknown } | { status: 'not-done' } | { status: 'unknown'; reason?: string };

/** What `verify` receives. */
export interface VerifyContext {
  /** The step's key (what the attempt passed to the external system, if anything). */
  readonly idempotencyKey: string;
  readonly taskId: string;
  readonly stepName: string;
  readonly signal: AbortSignal;
}

/**
 * What a step's `classify(error)` hook returns: a kind (`'transient'`, `'permanent'`, `'repair'`),
 * a partial class (`{ kind, retryAfterMs }`), or `undefined` to use the default classifier.
 */
export type ClassifyResult = FailureKind | { kind: FailureKind; retryAfterMs?: number; reason?: string } | undefined | null;

export type Classifier = (error: unknown) => ClassifyResult;

/** Every option of `ctx.step`, `ctx.forEach`, `ctx.transaction` and `ctx.waitForEvent`; a key not listed fails the task at the call. */
export const STEP_OPTION_NAMES = optionNames<StepOptions>()(
  'retry',
  'timeout',
  'classify',
  'repair',
  'output',
  'onExhausted',
  'ask',
  'fallback',
  'compensate',
  'key',
  'keyVersion',
  'keyTtl',
  'effect',
  'verify',
  'requires',
  'rateLimit',
);
export const FOR_EACH_OPTION_NAMES = optionNames<ForEachOptions>()(
  'retry',
  'timeout',
  'classify',
  'repair',
  'ask',
  'key',
  'keyVersion',
  'keyTtl',
  'effect',
  'verify',
  'requires',
  'rateLimit',
  'chunkSize',
  'concurrency',
);
export const TRANSACTION_OPTION_NAMES = optionNames<TransactionOptions>()('retry');
export const WAIT_FOR_EVENT_OPTION_NAMES = optionNames<WaitForEventOptions>()('timeout');
