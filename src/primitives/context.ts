/**
 * @module primitives/context
 * Internal: not part of the public API (the package exports only its index modules).
 * The `ctx` object handed to workflow code: the task's identity, the run's signal, and one
 * function per primitive (`step.ts`, `sleep.ts`, `wait-for-event.ts`), each bound to the run.
 */
import type { Duration } from '../duration.ts';
import { reportUsage } from '../ai/metering/meter.ts';
import type { ForEachOptions, Progress, StepContext, StepOptions, TransactionOptions, WaitForEventOptions } from '../api/step.ts';
import type { UsageReport, Workflow, WorkflowContext } from '../workflow.ts';
import { decodeJson } from '../serialize.ts';
import type { Run } from '../run/run.ts';
import { coreOf } from '../run/core.ts';
import { newest } from '../run/warm-shapes.ts';
import { InvalidArgumentError } from '../errors.ts';
import { forEach } from './for-each.ts';
import { patched } from './patched.ts';
import { tickOfKey } from '../schedule-key.ts';
import { sleep } from './sleep.ts';
import { step } from './step.ts';
import { waitForEvent } from './wait-for-event.ts';
import { RUN_OF } from '../run/run-of.ts';
import { transaction } from './transaction.ts';
import type { Transaction } from '../transaction-types.ts';
import { requestApproval } from '../approvals/request.ts';
import type { ApprovalOptions } from '../approvals/types.ts';
import type { ChildOptions, ChildrenOptions } from '../api/child.ts';
import { child, startChild, withChildren } from './child.ts';
import { children } from './children.ts';
import { setTags } from './tags.ts';

/** Where a workflow context keeps the Engine it runs under (read by `engineOf(ctx)`; not in the public type). */
export const ENGINE_OF: unique symbol = Symbol.for('stepwise.engine-of') as never;

/** The primitives of `ctx`, each a function of the run (and of the engine, for children). */
type PrimitiveName =
  'step' | 'transaction' | 'sleep' | 'waitForEvent' | 'approval' | 'patched' | 'progress' | 'setTags' | 'usage' | 'forEach' | 'startChild' | 'child' | 'children' | 'onCancel';

/**
 * How each primitive is bound to a run. Functions of the module, not closures made per run (see
 * resolvers.ts); a primitive is bound when the code first reads it.
 */
const BINDERS: { readonly [K in PrimitiveName]: (run: Run, engine: object | undefined) => WorkflowContext[K] } = {
  step: (run) => (<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions) => step(run, name, fn, options)) as WorkflowContext['step'],
  transaction: (run) => (<T>(name: string, fn: (tx: Transaction) => Promise<T>, options?: TransactionOptions) => transaction(run, name, fn, options)) as WorkflowContext['transaction'],
  sleep: (run) => (name: string, duration: Duration) => sleep(run, name, duration),
  waitForEvent: (run) => (<T>(name: string | readonly string[], options?: WaitForEventOptions) => waitForEvent<T>(run, name, options)) as WorkflowContext['waitForEvent'],
  approval: (run) => ((name: string, options?: ApprovalOptions) => requestApproval(run, name, options)) as WorkflowContext['approval'],
  patched: (run) => (id: string) => patched(run, id),
  progress: (run) => (p: Progress) => run.progress.report(null, p),
  setTags: (run) => (tags: Readonly<Record<string, string | null>>) => setTags(run, tags),
  usage: (run) => (s: StepContext, report: UsageReport) => reportUsage(coreOf(run), s, report),
  forEach: (run) =>
    ((name: string, items: readonly unknown[], fn: (item: unknown, index: number, s: StepContext) => unknown, options?: ForEachOptions) =>
      forEach(run, name, items, fn, options)) as WorkflowContext['forEach'],
  startChild: (run, engine) => ((wf: string | Workflow, input: unknown, options?: ChildOptions) => startChild(run, engine, wf, input, options)) as WorkflowContext['startChild'],
  child: (run, engine) => ((wf: string | Workflow, input: unknown, options?: ChildOptions) => child(run, engine, wf, input, options)) as WorkflowContext['child'],
  children: (run, engine) => ((wf: string | Workflow, inputs: readonly unknown[], options?: ChildrenOptions) => children(run, engine, wf, inputs, options)) as WorkflowContext['children'],
  onCancel: (run) => (fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown) => {
    if (typeof fn !== 'function') throw run.fail(new InvalidArgumentError('ctx.onCancel(fn): fn must be a function'));
    run.registerCancelHandler({ fn });
  },
};

/** A slot for each primitive (the class below lists them, so that every run's object has one shape; this type checks the list). */
type BoundSlots = { [K in PrimitiveName]: WorkflowContext[K] | undefined };

/** Where a ctx keeps the primitives bound so far (one object, of a fixed shape, per run). */
const BOUND: unique symbol = Symbol('stepwise.bound-primitives');

class Bound implements BoundSlots {
  step: WorkflowContext['step'] | undefined = undefined;
  transaction: WorkflowContext['transaction'] | undefined = undefined;
  sleep: WorkflowContext['sleep'] | undefined = undefined;
  waitForEvent: WorkflowContext['waitForEvent'] | undefined = undefined;
  approval: WorkflowContext['approval'] | undefined = undefined;
  patched: WorkflowContext['patched'] | undefined = undefined;
  progress: WorkflowContext['progress'] | undefined = undefined;
  setTags: WorkflowContext['setTags'] | undefined = undefined;
  usage: WorkflowContext['usage'] | undefined = undefined;
  forEach: WorkflowContext['forEach'] | undefined = undefined;
  startChild: WorkflowContext['startChild'] | undefined = undefined;
  child: WorkflowContext['child'] | undefined = undefined;
  children: WorkflowContext['children'] | undefined = undefined;
  onCancel: WorkflowContext['onCancel'] | undefined = undefined;
}

/** What a ctx's accessors read: its own symbol-keyed fields (a copy of the ctx's properties, as a fault plan makes, has them too). */
interface ContextFields {
  readonly [RUN_OF]: Run;
  readonly [ENGINE_OF]: object | undefined;
  readonly [BOUND]: Bound;
}

function primitiveAccessor<K extends PrimitiveName>(name: K): PropertyDescriptor {
  const bind = BINDERS[name];
  return {
    enumerable: true,
    get(this: ContextFields): WorkflowContext[K] {
      const bound = this[BOUND];
      return ((bound[name] as WorkflowContext[K] | undefined) ??= bind(this[RUN_OF], this[ENGINE_OF]) as never) as WorkflowContext[K];
    },
  };
}

/**
 * Every accessor of a ctx, shared by all of them. The identity fields come first, then
 * `scheduledAt` and `signal`, then the primitives, in the order `Object.keys(ctx)` lists them.
 */
const ACCESSORS: PropertyDescriptorMap = {
  scheduledAt: {
    enumerable: true,
    get(this: ContextFields): Date | null {
      const tick = tickOfKey(this[RUN_OF].task.idempotencyKey);
      return tick ? new Date(tick.at) : null;
    },
  },
  signal: {
    enumerable: true,
    get(this: ContextFields): AbortSignal {
      return this[RUN_OF].signal;
    },
  },
  ...Object.fromEntries((Object.keys(BINDERS) as PrimitiveName[]).map((name) => [name, primitiveAccessor(name)])),
};

/**
 * The `ctx` of one run. Every field is an own enumerable property, as on a plain object, that a
 * spread keeps. The primitives are functions bound to the run (`const { step } = ctx` works), each
 * made when first read: a run holds only those its code uses (hundreds of runs are in flight at
 * once, and what a run holds is what the garbage collector copies while it lives). Built by a
 * constructor with shared accessors, not as an object literal with getters and symbol keys, which
 * V8 builds through a slow path (several microseconds a run). The accessors read the run from the
 * ctx's own symbol-keyed fields, not from private fields, so that a copy of its properties works.
 */
class RunContext implements WorkflowContext {
  declare readonly scheduledAt: Date | null;
  declare readonly signal: AbortSignal;
  readonly [ENGINE_OF]: object | undefined;
  readonly [RUN_OF]: Run;
  readonly [BOUND] = new Bound();
  readonly taskId: string;
  readonly workflow: string;
  readonly workflowVersion: string;
  declare readonly step: WorkflowContext['step'];
  declare readonly transaction: WorkflowContext['transaction'];
  declare readonly sleep: WorkflowContext['sleep'];
  declare readonly waitForEvent: WorkflowContext['waitForEvent'];
  declare readonly approval: WorkflowContext['approval'];
  declare readonly patched: WorkflowContext['patched'];
  declare readonly progress: WorkflowContext['progress'];
  declare readonly setTags: WorkflowContext['setTags'];
  declare readonly usage: WorkflowContext['usage'];
  declare readonly forEach: WorkflowContext['forEach'];
  declare readonly startChild: WorkflowContext['startChild'];
  declare readonly child: WorkflowContext['child'];
  declare readonly children: WorkflowContext['children'];
  declare readonly onCancel: WorkflowContext['onCancel'];

  constructor(run: Run, engine: object | undefined) {
    this[ENGINE_OF] = engine;
    this[RUN_OF] = run;
    this.taskId = run.taskId;
    this.workflow = run.workflow.name;
    this.workflowVersion = run.task.workflowVersion;
    Object.defineProperties(this, ACCESSORS);
    Object.freeze(this);
    newest.runContext = this;
  }
}

export function createContext(run: Run, engine?: object): WorkflowContext {
  return new RunContext(run, engine);
}

/** How the kernel runs `wf`'s code on a run (`RunDeps.runCode`): its `ctx`, and the task's input. */
export function workflowCode(wf: Workflow, engine?: object): (run: Run) => Promise<unknown> {
  // Made once per workflow, not per run (see resolvers.ts).
  const code = (run: Run): Promise<unknown> => wf.fn(createContext(run, engine), decodeJson(run.task.input));
  return (run) => withChildren(run, engine, code);
}
