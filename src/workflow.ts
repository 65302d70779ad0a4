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
import type { EventResult, ForEachOptions, JsonCheck, Progress, StepContext, StepOptions, TransactionOptions, WaitForEventOptions } from './api/step.ts';
import type { ApprovalDecision, ApprovalOptions } from './api/approvals.ts';
import type { DwellOptions } from './dwell/types.ts';
import { checkDwell } from './dwell/types.ts';
import { resolveRetention, type RetentionPolicy } from './retention/policy.ts';
import { declaredSchedule } from './schedules/definition.ts';
import { checkConcurrency, checkPriority, type ConcurrencyKeyLimit } from './flow/options.ts';
import type { WorkflowSchedule } from './api/schedules.ts';
import type { ChildHandle, ChildOptions, ChildrenOptions } from './api/child.ts';

declare module './run/run.ts' {
  /** The workflow options that features read on a run (model calls: `ai/meter.ts`). */
  interface RunOptions {
    readonly budget?: Budget | undefined;
    readonly prices?: PriceTable | undefined;
  }
}

/** The durable API available inside a workflow function. */
export interface WorkflowContext {
  readonly taskId: string;
  readonly workflow: string;
  /** The version of the workflow the task started on (its code may be a later, compatible version). */
  readonly workflowVersion: string;
  /**
   * When the schedule tick that started this task was due (`engine.schedules`), the same in every
   * run of the task; null for a task no schedule started.
   */
  readonly scheduledAt: Date | null;
  /**
   * A marker for a change of code made in place (no new version): true for a task that reaches it
   * on the new code (recorded, so its replays get true too), false for a task whose journal was
   * recorded before the change (the old path replays as it ran). See docs/concepts.md, "Versions".
   * @example
   * if (await ctx.patched('add-fact-check')) await ctx.step('fact-check', () => check(draft));
   */
  patched(id: string): Promise<boolean>;
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
   * Merges tags into the task's (a null value removes one), so that `list({ tags })` finds it by
   * what the run learnt: written at once, no journal row; a replay writes the same again.
   * Resolves to the task's tags after the change.
   * @example await ctx.setTags({ tenant: request.tenant, model: chosen.id });
   */
  setTags(tags: Readonly<Record<string, string | null>>): Promise<Record<string, string>>;
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
  /**
   * Starts a child task of `workflow` whose parent is this task, on any worker that serves the
   * workflow, and returns its handle. The start is a durable call: a replay finds the same child,
   * and a crash after the child's creation does not start a second one. A cancel of this task
   * cancels its children (see docs/child-tasks.md).
   * @example
   * const h = await ctx.startChild(researcher, { q: 'tides' });  const answer = await h.result();
   */
  startChild<I, O, In>(workflow: Workflow<I, O, In> | string, input: In, options?: ChildOptions): Promise<ChildHandle<O>>;
  /**
   * Starts a child task and waits for its output (parked: no worker slot held while it runs);
   * throws ChildFailedError if the child failed or was cancelled.
   * @example
   * const answers = await Promise.all(questions.map((q) => ctx.child(researcher, { q })));
   */
  child<I, O, In>(workflow: Workflow<I, O, In> | string, input: In, options?: ChildOptions): Promise<O>;
  /**
   * One child task of `workflow` per input, at most `concurrency` running at once (the next starts
   * when one ends; starts made together are written together): their outputs in input order.
   * Throws the first ChildFailedError; children not started by then are not started.
   * @example
   * const answers = await ctx.children(researcher, questions.map((q) => ({ q })), { concurrency: 10 });
   */
  children<I, O, In>(workflow: Workflow<I, O, In> | string, inputs: readonly In[], options?: ChildrenOptions): Promise<O[]>;
}

/** Usage a step reports itself (see {@link WorkflowContext.usage}). */
export interface UsageReport extends TokenCounts {
  model: string;
  /** @defaultValue 'succeeded' */
  outcome?: AttemptOutcome;
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
  /**
   * A number: at most this many tasks of this workflow run at once, across all workers. Or a
   * limit per key: at most `limit` tasks of one key (computed from the input at start, and
   * scoped to this workflow) run at once across all workers; the others wait, due, without
   * holding a worker's slot, and run in order (see docs/flow-control.md).
   * @example { key: (input) => input.userId, limit: 1 }
   */
  concurrency?: number | ConcurrencyKeyLimit<I>;
  /**
   * The priority of this workflow's tasks (0..1000, higher first) unless a start gives its own:
   * among due tasks a worker claims the one with the earliest `runAt - priority × 1 s`, so a
   * task of priority p goes as if it had waited p seconds longer (lower priorities still age
   * forward and are never starved).
   * @defaultValue 0
   */
  priority?: number;
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
  /**
   * A cron schedule declared with the workflow: workers that serve it create or update the
   * schedule when they start (its id defaults to the workflow's name), as `engine.schedules.create`
   * would. Removing it from the code removes it at the next worker start.
   * @example { cron: '0 6 * * *', timezone: 'Europe/Berlin', input: { report: 'daily' } }
   */
  schedule?: WorkflowSchedule;
  /**
   * Each task's title, from its (checked) input: shown in task lists (CLI, HTTP API, dashboard) so
   * that people can tell tasks apart. A start's own `title` option wins. It must return a string
   * of 1-200 characters (else the start is refused with INVALID_ARGUMENT).
   * @example (input) => `Article: ${input.topic}`
   */
  title?: (input: I) => string;
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
const WORKFLOW_OPTIONS = [
  'version',
  'compatibleVersions',
  'input',
  'retry',
  'concurrency',
  'priority',
  'signals',
  'budget',
  'prices',
  'timeout',
  'cleanupTimeout',
  'dwell',
  'retention',
  'schedule',
  'title',
] as const satisfies readonly (keyof WorkflowOptions<unknown>)[];

/**
 * Declares a durable workflow.
 * @example
 * export const brief = workflow('research-brief', async (ctx, input: { topic: string }) => {
 *   const docs = await ctx.step('gather', () => gather(input.topic));
 *   return ctx.step('write', () => write(docs));
 * }, { version: 2 });
 */
export function workflow<I = unknown, O = unknown, In = I>(name: string, fn: WorkflowFunction<I, O>, options: WorkflowOptions<I, In> = {}): Workflow<I, O, In> {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new InvalidArgumentError(`Workflow name ${JSON.stringify(name)} is not valid: use 1-200 letters, digits and . _ : / - (starting with a letter or digit).`);
  }
  if (typeof fn !== 'function') throw new InvalidArgumentError(`workflow("${name}"): the second argument must be an async function.`);
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError(`workflow("${name}"): options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !(WORKFLOW_OPTIONS as readonly string[]).includes(k));
  if (unknown.length) {
    throw new InvalidArgumentError(`workflow("${name}"): unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${WORKFLOW_OPTIONS.join(', ')}).`);
  }
  if (options.concurrency !== undefined) checkConcurrency(`workflow("${name}")`, options.concurrency);
  if (options.priority !== undefined) checkPriority(`workflow("${name}")`, options.priority);
  if (options.signals !== undefined) {
    if (typeof options.signals !== 'object' || options.signals === null) throw new InvalidArgumentError(`workflow("${name}"): signals must be an object of schemas by signal name.`);
    for (const [signal, schema] of Object.entries(options.signals)) {
      if (typeof (schema as { parse?: unknown })?.parse !== 'function') throw new InvalidArgumentError(`workflow("${name}"): signals.${signal} must be a schema with parse(value).`);
    }
  }
  if (options.title !== undefined && typeof options.title !== 'function') {
    throw new InvalidArgumentError(`workflow("${name}"): title must be a function (input) => string, got ${typeof options.title}.`);
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
  if (options.schedule !== undefined) declaredSchedule(name, options.schedule);
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
export type {
  ClassifyResult,
  Classifier,
  EventResult,
  ForEachOptions,
  JsonCheck,
  JsonSafe,
  Progress,
  StandardResult,
  StandardSchemaLike,
  StepContext,
  StepOptions,
  TransactionOptions,
  VerifyAnswer,
  VerifyContext,
  WaitForEventOptions,
} from './api/step.ts';
