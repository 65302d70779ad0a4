/**
 * @module workflow
 * `workflow(name, fn, options)` declares a durable workflow: an async function of a context and a
 * JSON input. The definition is plain data; an Engine runs it.
 */
import { InvalidArgumentError } from './errors.ts';
import { resolveRetry } from './retry.ts';
import { toMs } from './duration.ts';
import { checkText } from './text-rules.ts';
import type { Duration } from './duration.ts';
import type { RetryOptions } from './retry.ts';
import type { SerializedError } from './serialize.ts';
import { checkBudget, type AttemptOutcome, type Budget, type PriceTable, type TokenCounts } from './ai/metering/usage.ts';
import type { Transaction } from './transaction-types.ts';
import type { VerifyAnswer, VerifyContext } from './idempotency/at-most-once.ts';
import type { Classifier } from './failure/classify.ts';
import type { ApprovalDecision, ApprovalOptions } from './approvals/types.ts';
import type { DwellOptions } from './dwell/types.ts';
import { checkDwell } from './dwell/types.ts';
import { resolveRetention, type RetentionPolicy } from './retention/policy.ts';

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

/** The durable API available inside a workflow function. */
export interface WorkflowContext {
  readonly taskId: string;
  readonly workflow: string;
  readonly workflowVersion: string;
  /** Fires when the run must stop (cancel, worker shutdown, lease lost). */
  readonly signal: AbortSignal;
  /**
   * Runs `fn` once and checkpoints its JSON result; when the task resumes, returns the recorded
   * result without running `fn` again. Retries per the step's policy.
   * @example
   * const page = await ctx.step('fetch', ({ signal, idempotencyKey }) => fetchPage(url, { signal, idempotencyKey }));
   */
  step<R>(name: string, fn: (step: StepContext) => R & JsonCheck<Awaited<R>>, options?: StepOptions): Promise<Awaited<R>>;
  /**
   * A step whose effects are SQL on the engine's own database: `fn` runs in a database transaction
   * that also writes the step's checkpoint, so the writes and the checkpoint commit together or
   * not at all — exactly once, across crashes (R24). `tx.dialect` says which SQL to write. Keep the
   * function to `tx` calls: on SQLite the transaction holds the file's write lock until it ends.
   * @example
   * await ctx.transaction('save-rows', async (tx) => {
   *   for (const r of rows) await tx.execute('INSERT INTO orders (id, total) VALUES (?, ?)', [r.id, r.total]);
   *   return { saved: rows.length };
   * });
   */
  transaction<R>(name: string, fn: (tx: Transaction) => Promise<R & JsonCheck<Awaited<R>>>, options?: TransactionOptions): Promise<Awaited<R>>;
  /** A durable sleep: a long one parks the task (no worker slot held) until it is due. */
  sleep(name: string, duration: Duration): Promise<void>;
  /**
   * Waits for `engine.signal(taskId, name, payload)`, or for the first of several events
   * (`['approve', 'reject']`: one wait, no loser left behind). Signals sent before the wait are
   * kept and delivered in order. The task parks while it waits.
   * @example
   * const decision = await ctx.waitForEvent(['approve', 'reject'], { timeout: '2d' });
   * if (decision.timedOut || decision.name === 'reject') return { published: false };
   */
  waitForEvent<T = unknown>(name: string | readonly string[], options?: WaitForEventOptions): Promise<EventResult<T>>;
  /**
   * Asks people for an approval and waits for it: the task parks (`waiting`, no worker slot held)
   * until a listed approver decides through `engine.decide` (or `stepwise approve`), or the timeout
   * policy settles it. The approval is a record (`engine.approvals()`), audited in the task's log.
   * @example
   * const review = await ctx.approval('review', { payload: draft, approvers: ['alice'], timeout: '24h' });
   */
  approval(name: string, options?: ApprovalOptions): Promise<ApprovalDecision>;
  /** Reports progress between steps (see {@link StepContext.progress}). */
  progress(progress: Progress): void;
  /**
   * Registers cleanup for a cancel: after the task is cancelled and its steps have stopped, `fn`
   * runs in a scope that the cancel does not interrupt, with its own deadline (the workflow's
   * `cleanupTimeout`); it may call `ctx.step` (recorded in the log as usual). Registered again on
   * every run (call it before the work it cleans up after).
   * @example
   * ctx.onCancel(async () => { await ctx.step('release-lock', () => locks.release(id)); });
   */
  onCancel(fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown): void;
  /**
   * A long loop with durable progress: `items` in chunks of `chunkSize`, each chunk one
   * checkpointed step (`<name>:<first>-<last>`) holding its items' results, up to `concurrency`
   * items at once. A crash or cancel loses at most the chunk in progress. Returns every result in
   * item order. `items` must be the same on every run (take them from an earlier step's output).
   * @example
   * const summaries = await ctx.forEach('summarise', docs, (doc, i, { signal }) => summarise(doc, signal), { chunkSize: 50, concurrency: 4 });
   */
  forEach<T, R>(name: string, items: readonly T[], fn: (item: T, index: number, step: StepContext) => R | PromiseLike<R>, options?: ForEachOptions): Promise<Awaited<R>[]>;
  /**
   * Records model usage of a step that called a model another way than `stepwise-engine/ai`: an
   * attempt of the step, priced from the workflow's price table, in the task's log and usage
   * totals (`engine.get(id).usage`), counted against its budget. Call it from inside the step
   * (with the step's context), so a replay never counts it twice.
   * @example
   * await ctx.step('summarise', async (s) => {
   *   const r = await myClient.complete(prompt, { signal: s.signal });
   *   await ctx.usage(s, { model: 'gpt-4o-mini', inputTokens: r.usage.in, outputTokens: r.usage.out });
   *   return r.text;
   * });
   */
  usage(step: StepContext, report: UsageReport): Promise<void>;
}

/** Usage a step reports itself (see {@link WorkflowContext.usage}). */
export interface UsageReport extends TokenCounts {
  model: string;
  /** @defaultValue 'succeeded' */
  outcome?: AttemptOutcome;
}

/** Options of `ctx.forEach`: the chunking, and the step options of every chunk (retry, timeout…). */
export interface ForEachOptions extends Omit<StepOptions, 'compensate' | 'onExhausted' | 'fallback' | 'output'> {
  /** Items per chunk (one checkpoint each). @defaultValue 100 */
  chunkSize?: number;
  /** Items of a chunk in flight at once. @defaultValue 1 */
  concurrency?: number;
}

/**
 * Anything with `parse(value)` (zod and most validators), used to check `start()` input. A schema
 * that declares its types the Standard Schema way (`~standard.types`, as zod does) makes `start()`
 * accept its *input* type (fields with `.default()` may be left out) while the workflow receives
 * its output type.
 */
export interface InputSchema<I, In = I> {
  parse(value: unknown): I;
  readonly '~standard'?: { readonly types?: { readonly input: In; readonly output: I } | undefined };
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

export interface WorkflowOptions<I, In = I> {
  /**
   * The code version. Tasks record the version they started with and are run only by workers that
   * serve that version (or list it in `compatibleVersions`), so a rolling deploy never replays a
   * task on code it was not started with. A journal that still does not match fails the task with
   * a non-determinism error that names both versions.
   * @defaultValue '1'
   */
  version?: string | number;
  /**
   * Older versions whose in-flight tasks this code can also run (its calls still match their
   * journals). Workers run only tasks started under `version` or one of these; tasks of other
   * versions wait for workers that serve them.
   */
  compatibleVersions?: readonly (string | number)[];
  /** Validates input at `start()`; a failure is an InvalidInputError and no task is created. */
  input?: InputSchema<I, In>;
  /**
   * How long a task may stay `waiting` or `paused` (from when it entered that status), or `running`
   * without a finished step or progress report, and what then: `fail` it, `cancel` it, or only record an `alert` (a `dwell:exceeded` log entry). Checked
   * by one scanner per worker; separate from an approval's own timeout.
   * @example { waiting: { after: '3d', then: 'fail' }, paused: { after: '1d', then: 'alert' } }
   */
  dwell?: DwellOptions;
  /** Default retry policy of this workflow's steps. */
  retry?: RetryOptions | number;
  /**
   * How long a task may take from its start (`engine.start`) to its end, waits and retries
   * included: past it the task fails with DEADLINE_EXCEEDED and the running step's signal fires.
   */
  timeout?: Duration;
  /**
   * How long the cleanup after a cancel or a failure (`ctx.onCancel` handlers, compensations) may
   * take, on the engine's clock: then the cleanup's signal fires and its remaining steps are refused.
   * @defaultValue '1m'
   */
  cleanupTimeout?: Duration;
  /** At most this many tasks of this workflow run at once, across all workers. */
  concurrency?: number;
  /**
   * Schemas of the signals the workflow waits for, by name (any `{ parse(v) }`, zod works):
   * `engine.signal()` refuses a payload that fails its schema (`INVALID_INPUT`) before it is stored,
   * so a bad payload never reaches (and fails) a waiting task. Checked by engines that know the
   * definition (given to `new Engine({ workflows })`); the CLI, which has no code, does not check.
   */
  signals?: Readonly<Record<string, InputSchema<unknown>>>;
  /**
   * Spending limit of each task of this workflow over its model calls (`stepwise-engine/ai`, or
   * `ctx.usage`): a call that would exceed it is refused and the task fails with
   * BudgetExceededError (BUDGET_EXCEEDED), or, with `onExceeded: { ask: { approvers, timeout } }`,
   * parks on an approval `budget:<step>` that a person approves with the new limits as data
   * (`{ tokens?, usd? }`). `engine.start(…, { budget })` overrides it per task.
   */
  budget?: Budget;
  /** Prices by model id (USD per million tokens), over {@link DEFAULT_PRICES}. */
  prices?: PriceTable;
  /**
   * How long this workflow's finished tasks are kept, per final status, over the engine's
   * `retention` (a status given here replaces the engine's; `null` keeps them). Workers that serve
   * the workflow delete older ones with everything they own (see `EngineOptions.retention`).
   * @example { succeeded: '1d', failed: '30d' }
   */
  retention?: RetentionPolicy;
}

export type WorkflowFunction<I, O> = (ctx: WorkflowContext, input: I) => Promise<O>;

const WORKFLOW = Symbol.for('stepwise.workflow');

/**
 * A workflow definition: `I` is what the function receives, `O` what it returns, `In` what
 * `engine.start()` accepts (the input schema's input type; `I` without a schema).
 */
export interface Workflow<I = unknown, O = unknown, In = I> {
  readonly [WORKFLOW]: true;
  readonly name: string;
  readonly version: string;
  readonly fn: WorkflowFunction<I, O>;
  readonly options: Readonly<WorkflowOptions<I, In>>;
  /** Type-only: what `start()` accepts. */
  readonly __input?: In;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$/;

/** The options `workflow()` knows; any other key is a mistake (a typo such as `tiemout`) and refused. */
const WORKFLOW_OPTIONS = ['version', 'compatibleVersions', 'input', 'retry', 'concurrency', 'signals', 'budget', 'prices', 'timeout', 'cleanupTimeout', 'dwell', 'retention'] as const satisfies readonly (keyof WorkflowOptions<unknown>)[];

/**
 * Declares a durable workflow.
 * @example
 * export const brief = workflow('research-brief', async (ctx, input: { topic: string }) => {
 *   const docs = await ctx.step('gather', () => gather(input.topic));
 *   return ctx.step('write', () => write(docs));
 * }, { version: 2 });
 */
export function workflow<I = unknown, O = unknown, In = I>(
  name: string,
  fn: WorkflowFunction<I, O>,
  options: WorkflowOptions<I, In> = {},
): Workflow<I, O, In> {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new InvalidArgumentError(
      `Workflow name ${JSON.stringify(name)} is not valid: use 1-200 letters, digits and . _ : / - (starting with a letter or digit).`,
    );
  }
  if (typeof fn !== 'function') throw new InvalidArgumentError(`workflow("${name}"): the second argument must be an async function.`);
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError(`workflow("${name}"): options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !(WORKFLOW_OPTIONS as readonly string[]).includes(k));
  if (unknown.length) {
    throw new InvalidArgumentError(`workflow("${name}"): unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${WORKFLOW_OPTIONS.join(', ')}).`);
  }
  if (options.concurrency !== undefined && (!Number.isInteger(options.concurrency) || options.concurrency < 1)) {
    throw new InvalidArgumentError(`workflow("${name}"): concurrency must be an integer ≥ 1.`);
  }
  if (options.signals !== undefined) {
    if (typeof options.signals !== 'object' || options.signals === null) throw new InvalidArgumentError(`workflow("${name}"): signals must be an object of schemas by signal name.`);
    for (const [signal, schema] of Object.entries(options.signals)) {
      if (typeof (schema as { parse?: unknown })?.parse !== 'function') throw new InvalidArgumentError(`workflow("${name}"): signals.${signal} must be a schema with parse(value).`);
    }
  }
  if (options.cleanupTimeout !== undefined) toMs(options.cleanupTimeout, `workflow("${name}"): cleanupTimeout`);
  if (options.timeout !== undefined) {
    const ms = toMs(options.timeout, `workflow("${name}"): timeout`);
    if (ms <= 0) throw new InvalidArgumentError(`workflow("${name}"): timeout must be longer than 0.`);
  }
  try {
    if (options.budget !== undefined) checkBudget(options.budget, `workflow("${name}")`);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message, { cause: e });
  }
  if (options.dwell !== undefined) checkDwell(name, options.dwell);
  if (options.retention !== undefined) resolveRetention(options.retention, `workflow("${name}")`);
  try {
    resolveRetry(options.retry);
  } catch (e) {
    throw new InvalidArgumentError(`workflow("${name}"): ${(e as Error).message}`, { cause: e });
  }
  const version = String(options.version ?? '1');
  if (!version || version.length > 100) throw new InvalidArgumentError(`workflow("${name}"): version must be 1-100 characters.`);
  checkText(version, `workflow("${name}"): the version`);
  return Object.freeze({ [WORKFLOW]: true as const, name, version, fn, options: Object.freeze({ ...options }) });
}

export function isWorkflow(value: unknown): value is Workflow {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[WORKFLOW] === true;
}

export type { SerializedError };
