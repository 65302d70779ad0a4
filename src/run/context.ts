/**
 * @module run/context
 * Internal: not part of the public API (the package exports only its index modules).
 * The `ctx` object handed to workflow code: the task's identity, the run's signal, and one
 * function per primitive (`step.ts`, `sleep.ts`, `wait-for-event.ts`), each bound to the run.
 */
import type { Duration } from '../duration.ts';
import type { Progress, StepContext, StepOptions, WaitForEventOptions, WorkflowContext } from '../workflow.ts';
import type { RunCore } from './core.ts';
import { sleep } from './sleep.ts';
import { step } from './step.ts';
import { waitForEvent } from './wait-for-event.ts';
import { requestApproval } from '../approvals/request.ts';
import type { ApprovalOptions } from '../approvals/types.ts';

export function createContext(run: RunCore): WorkflowContext {
  return Object.freeze({
    taskId: run.taskId,
    workflow: run.workflow.name,
    workflowVersion: run.workflow.version,
    get signal(): AbortSignal {
      return run.signal;
    },
    // The JSON bound on outputs is a compile-time check for workflow authors; the run takes any value.
    step: (<T>(name: string, fn: (s: StepContext) => PromiseLike<T> | T, options?: StepOptions) => step(run, name, fn, options)) as WorkflowContext['step'],
    sleep: (name: string, duration: Duration) => sleep(run, name, duration),
    waitForEvent: <T>(name: string | readonly string[], options?: WaitForEventOptions) => waitForEvent<T>(run, name, options),
    approval: (name: string, options?: ApprovalOptions) => requestApproval(run, name, options),
    progress: (p: Progress) => run.progress.report(null, p),
  });
}
