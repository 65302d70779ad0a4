/**
 * @module workflow
 * `workflow(name, fn, options)` declares a durable workflow: an async function of a context and a
 * JSON input. The definition is plain data; an Engine runs it.
 */
import { InvalidArgumentError } from './errors.ts';
import { resolveRetry } from './retry.ts';
import { checkText } from './text-rules.ts';
import type { Duration } from './duration.ts';
import type { RetryOptions } from './retry.ts';
import type { SerializedError } from './serialize.ts';
import type { ApprovalDecision, ApprovalOptions } from './approvals/types.ts';
import type { DwellOptions } from './dwell/types.ts';
import { checkDwell } from './dwell/types.ts';

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
   * The step runs only if the task's approval of this name (the latest, if it asked more than once)
   * is approved; otherwise it fails for good with an ApprovalRequiredError (code FORBIDDEN),
   * recorded as the step's failure, whatever path the code took to reach it.
   */
  requires?: string;
}

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
   * How long a task may stay `waiting` or `paused` (from when it entered that status), and what
   * then: `fail` it, `cancel` it, or only record an `alert` (a `dwell:exceeded` log entry). Checked
   * by one scanner per worker; separate from an approval's own timeout.
   * @example { waiting: { after: '3d', then: 'fail' }, paused: { after: '1d', then: 'alert' } }
   */
  dwell?: DwellOptions;
  /** Default retry policy of this workflow's steps. */
  retry?: RetryOptions | number;
  /** At most this many tasks of this workflow run at once, across all workers. */
  concurrency?: number;
  /**
   * Schemas of the signals the workflow waits for, by name (any `{ parse(v) }`, zod works):
   * `engine.signal()` refuses a payload that fails its schema (`INVALID_INPUT`) before it is stored,
   * so a bad payload never reaches (and fails) a waiting task. Checked by engines that know the
   * definition (given to `new Engine({ workflows })`); the CLI, which has no code, does not check.
   */
  signals?: Readonly<Record<string, InputSchema<unknown>>>;
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
const WORKFLOW_OPTIONS = ['version', 'compatibleVersions', 'input', 'retry', 'concurrency', 'signals', 'dwell'] as const satisfies readonly (keyof WorkflowOptions<unknown>)[];

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
  if (options.dwell !== undefined) checkDwell(name, options.dwell);
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
