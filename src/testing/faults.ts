/**
 * @module testing/faults
 * Fault injection for workflow authors: a declarative plan of what goes wrong, applied where it
 * would really happen, so that a test sees the engine's own retries, timeouts and backoffs:
 *
 * - `{ step, fail, times }`: the step's function throws `fail` on its first `times` attempts (the
 *   step's retry policy decides what happens next, as for a real error);
 * - `{ step, hang: true, times }`: the attempt does not return until its signal fires (its
 *   `timeout` times it out, a cancel stops it);
 * - `{ model: true | { step }, status, retryAfter, times }`: a model call answers an HTTP error
 *   (429 with `Retry-After`, 500, 503…) as the provider's SDK reports it (`APICallError` with
 *   `statusCode` and `responseHeaders`), through `plan.model(languageModel)`;
 * - `{ store: 'unavailable', from, for }`: every store call fails as a lost database does
 *   (STORE_UNAVAILABLE, retryable) for a span of the plan's clock, through `plan.store(store)`;
 * - `{ step, kill: true, times }`: the process dies as the step's attempt starts: the attempt never
 *   returns, the plan's stores answer nothing more (a dead process writes nothing), and
 *   `plan.killed` resolves (abandon the worker there, and resume in a new engine);
 *   `kill: 'process'` is a real SIGKILL of the process (for a worker process a test spawns).
 *
 * `plan.workflow(wf)` gives the workflow with the step faults applied (use it with `checkResume`,
 * which kills at every write, or alone). Every entry counts what it injected; `plan.unfired()` lists
 * those that never fired (a mistyped step name is not silently ignored) and `plan.assertFired()`
 * throws naming them.
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError, StoreUnavailableError } from '../errors.ts';
import { checkOptionKeys } from '../option-keys.ts';
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import type { StepContext, StepOptions, Workflow, WorkflowContext } from '../workflow.ts';
import { workflow as defineWorkflow } from '../workflow.ts';

export type StepFault = { step: string; fail: Error | string; times?: number } | { step: string; hang: true; times?: number } | { step: string; kill: true | 'process'; times?: number };
export type ModelFault = { model: true | { step: string }; status: number; retryAfter?: Duration; message?: string; times?: number };
export type StoreFault = { store: 'unavailable'; from?: Duration; for: Duration };
export type Fault = StepFault | ModelFault | StoreFault;

const KEYS: Record<string, readonly string[]> = {
  fail: ['step', 'fail', 'times'],
  hang: ['step', 'hang', 'times'],
  kill: ['step', 'kill', 'times'],
  model: ['model', 'status', 'retryAfter', 'message', 'times'],
  store: ['store', 'from', 'for'],
};

interface Entry {
  fault: Fault;
  kind: 'fail' | 'hang' | 'kill' | 'model' | 'store';
  times: number;
  fired: number;
}

function kindOf(f: Record<string, unknown>, at: number): Entry['kind'] {
  const kind = 'fail' in f ? 'fail' : 'hang' in f ? 'hang' : 'kill' in f ? 'kill' : 'model' in f ? 'model' : 'store' in f ? 'store' : null;
  if (!kind) throw new InvalidArgumentError(`faultPlan(): entry ${at} is none of { step, fail }, { step, hang }, { step, kill }, { model, status }, { store: 'unavailable', for }.`);
  if (kind === 'kill' && f.kill !== true && f.kill !== 'process')
    throw new InvalidArgumentError(`faultPlan(): entry ${at}: kill is true (this engine's process, in place) or 'process' (a real SIGKILL).`);
  const unknown = Object.keys(f).filter((k) => !(KEYS[kind] as readonly string[]).includes(k));
  if (unknown.length)
    throw new InvalidArgumentError(`faultPlan(): entry ${at} (${kind}): unknown key ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${(KEYS[kind] as readonly string[]).join(', ')}).`);
  return kind;
}

/** A checked plan: see the module's description. `clock`: the time store spans are measured on. */
export function faultPlan(faults: readonly Fault[], options: { clock?: Clock } = {}): FaultPlan {
  if (!Array.isArray(faults)) throw new InvalidArgumentError('faultPlan() takes a list of faults.');
  checkOptionKeys(options, ['clock'], 'faultPlan()');
  return new FaultPlan(faults, options.clock ?? { now: () => Date.now() });
}

export class FaultPlan {
  readonly #entries: Entry[];
  readonly #clock: Pick<Clock, 'now'>;
  readonly #start: number;
  /** Set once a kill fired: the plan's stores answer nothing more. */
  #dead = false;
  #killedWith: (v: { step: string }) => void = () => undefined;
  /** Resolves when a `{ step, kill: true }` fault fires, with the step it fired at. */
  readonly killed: Promise<{ step: string }> = new Promise((resolve) => (this.#killedWith = resolve));

  constructor(faults: readonly Fault[], clock: Pick<Clock, 'now'>) {
    this.#clock = clock;
    this.#start = clock.now();
    this.#entries = faults.map((fault, at) => {
      const f = fault as Record<string, unknown>;
      const kind = kindOf(f, at);
      if (kind !== 'store' && kind !== 'model' && (typeof f.step !== 'string' || !f.step)) throw new InvalidArgumentError(`faultPlan(): entry ${at}: step must be a step name.`);
      if (kind === 'model' && (typeof f.status !== 'number' || f.status < 400 || f.status > 599))
        throw new InvalidArgumentError(`faultPlan(): entry ${at}: status must be an HTTP error status (400-599).`);
      if (kind === 'store') toMs((fault as StoreFault).for, 'for');
      const times = f.times === undefined ? (kind === 'store' ? Infinity : 1) : Number(f.times);
      if (!(times >= 1)) throw new InvalidArgumentError(`faultPlan(): entry ${at}: times must be a whole number ≥ 1.`);
      return { fault, kind, times, fired: 0 };
    });
  }

  /** The entries that never fired, as given. */
  unfired(): Fault[] {
    return this.#entries.filter((e) => e.fired === 0).map((e) => e.fault);
  }

  /** How many times each entry fired, in plan order. */
  fired(): number[] {
    return this.#entries.map((e) => e.fired);
  }

  /** Throws naming the entries that never fired (a step name that matches no step, a span no call fell in). */
  assertFired(): void {
    const unfired = this.unfired();
    if (unfired.length) throw new InvalidArgumentError(`faultPlan: ${unfired.length} fault(s) never fired: ${unfired.map((f) => JSON.stringify(f)).join('; ')}.`);
  }

  /** The next fault for an attempt of step `name` (counted as fired), or undefined. */
  #take(kinds: ReadonlyArray<Entry['kind']>, match: (e: Entry) => boolean): Entry | undefined {
    const e = this.#entries.find((x) => kinds.includes(x.kind) && x.fired < x.times && match(x));
    if (e) e.fired++;
    return e;
  }

  /** `wf` with the plan's step faults applied to its steps (same name, version and options). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  workflow<W extends Workflow<any, any, any>>(wf: W): W {
    const fn = (wf as Workflow).fn;
    const wrapped = defineWorkflow(wf.name, (ctx: WorkflowContext, input: unknown) => fn(this.#context(ctx), input), (wf as Workflow).options as never);
    return wrapped as unknown as W;
  }

  /** A ctx whose `step` injects the plan's faults into the step functions. */
  #context(ctx: WorkflowContext): WorkflowContext {
    const step = (name: string, stepFn: (s: StepContext) => unknown, options?: StepOptions): Promise<unknown> =>
      ctx.step(
        name,
        (s) => {
          const e = this.#take(['fail', 'hang', 'kill'], (x) => (x.fault as StepFault).step === name);
          if (!e) return stepFn(s);
          if (e.kind === 'kill') return this.#kill(e, name);
          if (e.kind === 'hang') return new Promise((_, reject) => s.signal.addEventListener('abort', () => reject(s.signal.reason as Error), { once: true }));
          const fail = (e.fault as { fail: Error | string }).fail;
          throw typeof fail === 'string' ? new Error(fail) : fail;
        },
        options,
      );
    // Every own property, symbols included (the engine finds the run through them), with `step` replaced.
    const copy = Object.create(Object.getPrototypeOf(ctx) as object) as WorkflowContext;
    for (const key of Reflect.ownKeys(ctx)) if (key !== 'step') Object.defineProperty(copy, key, Object.getOwnPropertyDescriptor(ctx, key) as PropertyDescriptor);
    Object.defineProperty(copy, 'step', { value: step, enumerable: true });
    return Object.freeze(copy);
  }

  /** The process dies at step `name`: for real (`'process'`), or in place: nothing more reaches the plan's stores and the attempt never ends. */
  #kill(e: Entry, name: string): Promise<never> {
    if ((e.fault as { kill: true | 'process' }).kill === 'process') process.kill(process.pid, 'SIGKILL');
    this.#dead = true;
    this.#killedWith({ step: name });
    return new Promise<never>(() => undefined);
  }

  /**
   * `model` (an AI SDK LanguageModel, V2 or V3) whose calls answer the plan's model faults: an
   * `APICallError`-shaped error (`statusCode`, `responseHeaders` with `retry-after`, `isRetryable`)
   * as the provider packages throw it, so the engine's classification and backoff run as in production.
   */
  model<M extends object>(model: M, step?: () => string | undefined): M {
    const inject = (): void => {
      const current = step?.();
      const e = this.#take(['model'], (x) => {
        const m = (x.fault as ModelFault).model;
        return m === true || (current !== undefined && m.step === current);
      });
      if (!e) return;
      const f = e.fault as ModelFault;
      const headers: Record<string, string> = f.retryAfter === undefined ? {} : { 'retry-after': String(Math.ceil(toMs(f.retryAfter, 'retryAfter') / 1000)) };
      throw Object.assign(new Error(f.message ?? `HTTP ${f.status} (injected by faultPlan)`), {
        name: 'AI_APICallError',
        statusCode: f.status,
        responseHeaders: headers,
        isRetryable: f.status === 429 || f.status >= 500,
      });
    };
    return new Proxy(model, {
      get: (target, key, receiver) => {
        const value = Reflect.get(target, key, receiver) as unknown;
        if ((key === 'doGenerate' || key === 'doStream') && typeof value === 'function') {
          return async (...args: unknown[]) => {
            inject();
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return value;
      },
    });
  }

  /**
   * `store` failing every call as an unreachable database does while a store fault's span lasts;
   * once a kill fired, answering nothing (a dead process's calls never complete).
   */
  store(store: Store): Store {
    const down = (): boolean => {
      const t = this.#clock.now() - this.#start;
      const e = this.#entries.find((x) => {
        if (x.kind !== 'store') return false;
        const f = x.fault as StoreFault;
        const from = f.from === undefined ? 0 : toMs(f.from, 'from');
        return t >= from && t < from + toMs(f.for, 'for');
      });
      if (e) e.fired++;
      return e !== undefined;
    };
    return new Proxy(store, {
      get: (target, key, receiver) => {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (typeof value !== 'function' || key === 'close' || key === 'constructor') return value;
        return (...args: unknown[]) => {
          if (this.#dead) {
            // A synchronous write (SQLite's `…Now`) cannot wait forever: it fails, and nothing is written.
            if (String(key).endsWith('Now')) throw new StoreUnavailableError('The process was killed (injected by faultPlan).');
            return new Promise(() => undefined);
          }
          if (down()) return Promise.reject(new StoreUnavailableError('The store is unavailable (injected by faultPlan).'));
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  }
}
