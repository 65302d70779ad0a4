/**
 * @module schedules/wiring
 * An engine's schedules: the `engine.schedules` commands, and the firing of due ticks its workers
 * run, both over the engine's own start, get and cancel.
 */
import { isStepwiseError } from '../errors.ts';
import type { Clock } from '../clock.ts';
import type { TaskStatus } from '../lifecycle.ts';
import type { Store } from '../store.ts';
import { fireDue } from './fire.ts';
import { Schedules } from './schedules.ts';
import { reconcileDeclared } from './declared.ts';
import type { Workflow } from '../workflow.ts';

/** What schedules use of their engine (its public commands). */
export interface ScheduleHost {
  open(): Promise<Store>;
  readonly clock: Clock;
  start(workflow: string, input: unknown, options: { idempotencyKey: string }): Promise<{ id: string }>;
  get(id: string): Promise<{ status: TaskStatus }>;
  cancel(id: string, options: { reason: string }): Promise<unknown>;
}

/**
 * Fires the due ticks of a worker's workflows (the first call also reconciles the schedules they
 * declare); returns when the next tick of any schedule is due, on the engine's clock.
 */
export type FireSchedules = (workflows: ReadonlyMap<string, Workflow>) => Promise<number | null>;

export function engineSchedules(host: ScheduleHost): { schedules: Schedules; fire: FireSchedules } {
  // A tick's key already names a task (a tick fired before a crash, whose schedule's input changed
  // since): that task is the tick's.
  const start = async (workflow: string, input: unknown, idempotencyKey: string): Promise<string> => {
    try {
      return (await host.start(workflow, input, { idempotencyKey })).id;
    } catch (e) {
      if (isStepwiseError(e, 'IDEMPOTENCY_CONFLICT')) return (e as unknown as { existingTaskId: string }).existingTaskId;
      throw e;
    }
  };
  const status = async (id: string): Promise<TaskStatus | null> => {
    try {
      return (await host.get(id)).status;
    } catch (e) {
      if (isStepwiseError(e, 'TASK_NOT_FOUND')) return null;
      throw e;
    }
  };
  const cancel = async (id: string, reason: string): Promise<void> => {
    try {
      await host.cancel(id, { reason });
    } catch (e) {
      // It ended (or was deleted) meanwhile: nothing to cancel.
      if (!isStepwiseError(e, 'ILLEGAL_TRANSITION') && !isStepwiseError(e, 'TASK_NOT_FOUND')) throw e;
    }
  };
  // Each worker's map of workflows, once its declared schedules were reconciled.
  const reconciled = new WeakSet<ReadonlyMap<string, Workflow>>();
  return {
    schedules: new Schedules({ store: () => host.open(), clock: host.clock, start }),
    fire: async (workflows) => {
      if (!reconciled.has(workflows)) {
        reconciled.add(workflows);
        await reconcileDeclared(await host.open(), host.clock, workflows);
      }
      return (await fireDue({ store: () => host.open(), clock: host.clock, serves: (w) => workflows.has(w), start, status, cancel })).nextAt;
    },
  };
}
