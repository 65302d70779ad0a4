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

export function createContext(run: Run, engine?: object): WorkflowContext {
  return Object.freeze({
    [ENGINE_OF]: engine,
    taskId: run.taskId,
    workflow: run.workflow.name,
    workflowVersion: run.task.workflowVersion,
    get scheduledAt(): Date | null {
      const tick = tickOfKey(run.task.idempotencyKey);
      return tick ? new Date(tick.at) : null;
    },
    get signal(): AbortSignal {
      return run.signal;
    },
    // The JSON bound on outputs is a compile-time check for workflow authors; the run takes any value.
    step: (<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions) => step(run, name, fn, options)) as WorkflowContext['step'],
    transaction: (<T>(name: string, fn: (tx: Transaction) => Promise<T>, options?: TransactionOptions) => transaction(run, name, fn, options)) as WorkflowContext['transaction'],
    sleep: (name: string, duration: Duration) => sleep(run, name, duration),
    waitForEvent: <T>(name: string | readonly string[], options?: WaitForEventOptions) => waitForEvent<T>(run, name, options),
    approval: (name: string, options?: ApprovalOptions) => requestApproval(run, name, options),
    patched: (id: string) => patched(run, id),
    progress: (p: Progress) => run.progress.report(null, p),
    setTags: (tags: Readonly<Record<string, string | null>>) => setTags(run, tags),
    usage: (step: StepContext, report: UsageReport) => reportUsage(coreOf(run), step, report),
    [RUN_OF]: run,
    forEach: ((name: string, items: readonly unknown[], fn: (item: unknown, index: number, s: StepContext) => unknown, options?: ForEachOptions) =>
      forEach(run, name, items, fn, options)) as WorkflowContext['forEach'],
    startChild: ((wf: string | Workflow, input: unknown, options?: ChildOptions) => startChild(run, engine, wf, input, options)) as WorkflowContext['startChild'],
    child: ((wf: string | Workflow, input: unknown, options?: ChildOptions) => child(run, engine, wf, input, options)) as WorkflowContext['child'],
    children: ((wf: string | Workflow, inputs: readonly unknown[], options?: ChildrenOptions) => children(run, engine, wf, inputs, options)) as WorkflowContext['children'],
    onCancel: (fn: (info: { reason: string | undefined; signal: AbortSignal }) => unknown) => {
      if (typeof fn !== 'function') throw run.fail(new InvalidArgumentError('ctx.onCancel(fn): fn must be a function'));
      run.registerCancelHandler({ fn });
    },
  });
}

/** How the kernel runs `wf`'s code on a run (`RunDeps.runCode`): its `ctx`, and the task's input. */
export function workflowCode(wf: Workflow, engine?: object): (run: Run) => Promise<unknown> {
  return (run) => withChildren(run, engine, () => wf.fn(createContext(run, engine), decodeJson(run.task.input)));
}
