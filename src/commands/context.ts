/**
 * @module commands/context
 * What every command module gets from the engine: the open store, the clock, the registered
 * workflows, the limits and observers, and the two ways to tell this process of a write (news for
 * its workers and waiters, new log entries for its readers). Also the steps every command shares:
 * the actor of a command, a task's row, and a user command's guarded transition.
 */
import type { Clock } from '../clock.ts';
import { ConcurrentUpdateError, InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import type { LifecycleEvent } from '../lifecycle.ts';
import type { Limits } from '../limits.ts';
import type { Observer } from '../observers.ts';
import type { StepRow, Store, TaskPatch, TaskRow, WakeEvent } from '../store.ts';
import type { Actor } from '../task-events.ts';
import { checkText } from '../text-rules.ts';
import { planTransition, wakeFor } from '../transitions.ts';
import type { Workflow } from '../workflow.ts';
import type { By } from './options.ts';

export interface CommandContext {
  /** The store, opened and migrated once. */
  open(): Promise<Store>;
  readonly clock: Clock;
  readonly workflows: ReadonlyMap<string, Workflow>;
  readonly limits: Required<Limits>;
  readonly observers: readonly Observer[];
  /** Passes news of a write to this process's workers and waiters; `row`: the task as the write committed it. */
  deliver(e: WakeEvent, row?: TaskRow): void;
  /** Tells this process's log readers that entries of `taskId` were committed. */
  appended(taskId: string): void;
  /** The Engine these commands serve (a replay hands it to workflow code's `engineOf(ctx)`). */
  readonly engine: object;
}

/** The actor of a command: `by` checked, an anonymous user without it. */
export function actorOf(by: By | undefined): Actor {
  if (by === undefined) return { kind: 'user', id: 'anonymous' };
  const actor: Actor = typeof by === 'string' ? { kind: 'user', id: by } : by;
  if (typeof actor !== 'object' || actor === null || !['user', 'worker', 'system'].includes(actor.kind) || typeof actor.id !== 'string' || !actor.id || actor.id.length > 200) {
    throw new InvalidArgumentError('`by` must be a name of 1-200 characters or { kind: "user" | "worker" | "system", id }.');
  }
  checkText(actor.id, 'The actor (`by`)');
  return { kind: actor.kind, id: actor.id };
}

/** The task `id`, or TaskNotFoundError. */
export async function taskRow(store: Store, id: string): Promise<TaskRow> {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A task id is required.');
  const row = await store.getTask(id);
  if (!row) throw new TaskNotFoundError(id);
  return row;
}

/** What a command writes besides the status change. */
export interface CommandWrite {
  set?: TaskPatch;
  detail?: unknown;
  steps?: StepRow[];
  deleteSteps?: number[];
}

/**
 * A user command: plan the transition from the current row, write it with compare-and-set; a
 * command that loses a race re-reads and re-plans.
 */
export async function runCommand(
  ctx: CommandContext,
  id: string,
  event: LifecycleEvent,
  by: By | undefined,
  build: (task: TaskRow) => CommandWrite | Promise<CommandWrite>,
  cancelReason?: string | null,
): Promise<TaskRow> {
  const actor = actorOf(by);
  const store = await ctx.open();
  for (let attempt = 0; attempt < 20; attempt++) {
    const task = await taskRow(store, id);
    const extra = await build(task);
    const { write } = planTransition({
      taskId: id,
      state: task,
      event,
      guard: { version: task.version },
      at: ctx.clock.now(),
      actor,
      ...(extra.set ? { set: extra.set } : {}),
      detail: extra.detail,
      ...(extra.steps ? { steps: extra.steps } : {}),
      ...(extra.deleteSteps ? { deleteSteps: extra.deleteSteps } : {}),
      notify: (edge) => wakeFor(edge, id, task.workflow, cancelReason),
      parentId: task.parentId,
    });
    const row = await store.transition(write);
    if (row) {
      if (write.notify) ctx.deliver(write.notify, row);
      ctx.appended(id);
      return row;
    }
  }
  throw new ConcurrentUpdateError(id);
}
