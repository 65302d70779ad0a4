/**
 * @module commands/start
 * `engine.start` and `engine.startMany`: each start planned (start-plan.ts), then written by the
 * start batcher, which puts the concurrent starts of this process in one statement and one commit.
 */
import { START_MANY_ITEM, START_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { StartBatcher } from '../start-batcher.ts';
import { planStart, startResult, type PlannedStart, type StartAnswer, type StartContext, type StartManyItem } from '../start-plan.ts';
import type { Store, TaskRow, WakeEvent } from '../store.ts';
import type { ResultWaiters } from '../result-waiters.ts';
import { batchWakeOfRows } from '../transitions.ts';
import type { Workflow } from '../workflow.ts';
import { actorOf, type CommandContext } from './context.ts';
import type { StartOptions } from './options.ts';
import { refuseKeysInBatch, startKeyed, startKeys } from './keyed-start.ts';

export interface StartDeps {
  ctx: CommandContext;
  /** This process's start batcher over `store`. */
  batcher(store: Store): StartBatcher;
}

export function startContext(ctx: CommandContext, store: Store): StartContext {
  return { store, clock: ctx.clock, limits: ctx.limits, workflows: ctx.workflows, actorOf };
}

export async function startOne(deps: StartDeps, workflow: string | Workflow<unknown, unknown, unknown>, input: unknown, options: StartOptions): Promise<StartAnswer> {
  checkOptionKeys(options, START_OPTIONS, 'engine.start()');
  const keys = startKeys(options);
  const store = await deps.ctx.open();
  const planned = await planStart(startContext(deps.ctx, store), workflow, input, options);
  if (keys) return startKeyed(store, deps.batcher(store), planned, keys);
  // Concurrent starts of this process share one statement and one commit (start-batcher.ts).
  return startResult(planned, await deps.batcher(store).insert(planned.task));
}

export async function startAll(deps: StartDeps, items: readonly StartManyItem[]): Promise<StartAnswer[]> {
  const store = await deps.ctx.open();
  if (!Array.isArray(items)) throw new InvalidArgumentError('engine.startMany() takes an array of { workflow, input, idempotencyKey?, delay? }.');
  const context = startContext(deps.ctx, store);
  const planned: PlannedStart[] = [];
  for (const [i, item] of items.entries()) {
    if (typeof item !== 'object' || item === null) throw new InvalidArgumentError(`startMany(): item ${i} must be an object { workflow, input, idempotencyKey?, delay? }.`);
    checkOptionKeys(item, START_MANY_ITEM, `startMany(): item ${i}`);
    refuseKeysInBatch(item, `startMany(): item ${i}`);
    try {
      planned.push(await planStart(context, item.workflow, item.input, item));
    } catch (e) {
      if (e instanceof Error) e.message = `startMany(): item ${i}: ${e.message}`;
      throw e;
    }
  }
  const inserted = await deps.batcher(store).insertMany(planned.map((p) => p.task));
  return planned.map((p, i) => startResult(p, inserted[i] as (typeof inserted)[number]));
}

/**
 * Tells this process of tasks its start batcher created: its `result()` waiters (when it will hear
 * of their ends), its workers (one wake-up for the batch) and its log readers.
 */
export function announceCreated(tasks: readonly TaskRow[], to: { tracksEnds: boolean; waiters: ResultWaiters; deliver(e: WakeEvent): void; appended(taskId: string): void }): void {
  if (to.tracksEnds) to.waiters.created(tasks.map((t) => t.id));
  const wake = batchWakeOfRows(tasks);
  if (wake) to.deliver(wake);
  for (const t of tasks) to.appended(t.id);
}
