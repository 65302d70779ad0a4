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

/**
 * The `ctx` of one run. Every field is an own enumerable property, as on a plain object: the
 * primitives are functions bound to the run (`const { step } = ctx` works), `signal` and
 * `scheduledAt` accessors read when asked for. Built by a constructor with shared accessors, not
 * as an object literal with getters and symbol keys, which V8 builds through a slow path (several
 * microseconds a run).
 */
class RunContext implements WorkflowContext {
  static readonly #accessors: PropertyDescriptorMap = {
    scheduledAt: {
      enumerable: true,
      get(this: RunContext): Date | null {
        const tick = tickOfKey(this.#run.task.idempotencyKey);
        return tick ? new Date(tick.at) : null;
      },
    },
    signal: {
      enumerable: true,
      get(this: RunContext): AbortSignal {
        return this.#run.signal;
      },
    },
  };
  readonly #run: Run;
  declare readonly scheduledAt: Date | null;
  declare readonly signal: AbortSignal;
  readonly [ENGINE_OF]: object | undefined;
  readonly [RUN_OF]: Run;
  readonly taskId: string;
  readonly workflow: string;
  readonly workflowVersion: string;
  readonly step: WorkflowContext['step'];
  readonly transaction: WorkflowContext['transaction'];
  readonly sleep: WorkflowContext['sleep'];
  readonly waitForEvent: WorkflowContext['waitForEvent'];
  readonly approval: WorkflowContext['approval'];
  readonly patched: WorkflowContext['patched'];
  readonly progress: WorkflowContext['progress'];
  readonly setTags: WorkflowContext['setTags'];
  readonly usage: WorkflowContext['usage'];
  readonly forEach: WorkflowContext['forEach'];
  readonly startChild: WorkflowContext['startChild'];
  readonly child: WorkflowContext['child'];
  readonly children: WorkflowContext['children'];
  readonly onCancel: WorkflowContext['onCancel'];

  constructor(run: Run, engine: object | undefined) {
    this.#run = run;
    this[ENGINE_OF] = engine;
    this[RUN_OF] = run;
    this.taskId = run.taskId;
    this.workflow = run.workflow.name;
    this.workflowVersion = run.task.workflowVersion;
    Object.defineProperties(this, RunContext.#accessors);
    // The JSON bound on outputs is a compile-time check for workflow authors; the run takes any value.
    this.step = (<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions) => step(run, name, fn, options)) as WorkflowContext['step'];
    this.transaction = (<T>(name: string, fn: (tx: Transaction) => Promise<T>, options?: TransactionOptions) => transaction(run, name, fn, options)) as WorkflowContext['transaction'];
    this.sleep = (name: string, duration: Duration) => sleep(run, name, duration);
    this.waitForEvent = (<T>(name: string | readonly string[], options?: WaitForEventOptions) => waitForEvent<T>(run, name, options)) as WorkflowContext['waitForEvent'];
    this.approval = ((name: string, options?: ApprovalOptions) => requestApproval(run, name, options)) as WorkflowContext['approval'];
    this.patched = (id: string) => patched(run, id);
    this.progress = (p: Progress) => run.progress.report(null, p);
    this.setTags = (tags: Readonly<Record<string, string | null>>) => setTags(run, tags);
    this.usage = (s: StepContext, report: UsageReport) => reportUsage(coreOf(run), s, report);
    this.forEach = ((name: string, items: readonly unknown[], fn: (item: unknown, index: number, s: StepContext) => unknown, options?: ForEachOptions) =>
      forEach(run, name, items, fn, options)) as WorkflowContext['forEach'];
    this.startChild = ((wf: string | Workflow, input: unknown, options?: ChildOptions) => startChild(run, engine, wf, input, options)) as WorkflowContext['startChild'];
    this.child = ((wf: string | Workflow, input: unknown, options?: ChildOptions) => child(run, engine, wf, input, options)) as WorkflowContext['child'];
    this.children = ((wf: string | Workflow, inputs: readonly unknown[], options?: ChildrenOptions) => children(run, engine, wf, inputs, options)) as WorkflowContext['children'];
    this.onCancel = (fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown) => {
      if (typeof fn !== 'function') throw run.fail(new InvalidArgumentError('ctx.onCancel(fn): fn must be a function'));
      run.registerCancelHandler({ fn });
    };
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
