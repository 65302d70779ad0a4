/**
 * @module commands/keyed-start
 * Starts tied to the tasks already holding a key (`engine.start(…, { debounce })` and
 * `{ singleton }`): the options checked and combined, the task planned as any start is, then
 * written by the store's own atomic operation for that key (store/keyed-starts.ts) instead of the
 * start batcher. And the check `engine.retry` makes before it revives a failed singleton task.
 */
import { resolveDebounce, resolveSingleton, type ResolvedDebounce, type SingletonOptions } from '../api/start-keys.ts';
import { ConflictError, InvalidArgumentError, SingletonRunningError } from '../errors.ts';
import type { StartBatcher } from '../start-batcher.ts';
import { startResult, type PlannedStart, type StartAnswer } from '../start-plan.ts';
import type { Store, TaskRow } from '../store.ts';
import { debouncedEntry } from '../task-events/debounce.ts';
import type { StartOptions } from './options.ts';

/** The key options of one start, checked. */
export type StartKeys = { debounce: ResolvedDebounce } | { singleton: Required<SingletonOptions> };

/** The start's debounce or singleton option, checked against the options it cannot go with; null if neither. */
export function startKeys(options: StartOptions): StartKeys | null {
  if (options.debounce !== undefined) {
    const clash = (['singleton', 'idempotencyKey', 'delay'] as const).find((k) => options[k] !== undefined);
    if (clash) {
      const why = {
        singleton: 'a debounced task is already one task per key',
        idempotencyKey: 'a later debounced start answers with the task of its debounce key and replaces its input',
        delay: 'the debounce period sets when the task is due',
      }[clash];
      throw new InvalidArgumentError(`engine.start(): debounce cannot be combined with ${clash} (${why}).`);
    }
    return { debounce: resolveDebounce(options.debounce) };
  }
  if (options.singleton !== undefined) return { singleton: resolveSingleton(options.singleton) };
  return null;
}

/** Refuses the key options in `engine.startMany()`, whose items are written together without reading the tasks holding keys. */
export function refuseKeysInBatch(item: object, where: string): void {
  for (const k of ['debounce', 'singleton'] as const) {
    if (k in item && (item as Record<string, unknown>)[k] !== undefined) {
      throw new InvalidArgumentError(`${where}: ${k} is not supported by engine.startMany(); start such tasks one by one with engine.start().`);
    }
  }
}

export async function startKeyed(store: Store, batcher: StartBatcher, planned: PlannedStart, keys: StartKeys): Promise<StartAnswer> {
  const name = planned.name;
  if ('debounce' in keys) {
    const d = keys.debounce;
    const task = { ...planned.task, runAt: planned.task.createdAt + d.periodMs, debounceKey: d.key };
    const actor = { kind: task.log.actorKind, id: task.log.actorId };
    const log = debouncedEntry(actor, d.key, task.input, task.runAt);
    const r = await batcher.insertAlone(task, (notify) => store.startDebounced(task, { maxWaitMs: d.maxWaitMs, log }, notify));
    return { id: r.task.id, workflow: name, status: r.task.status, created: r.created };
  }
  const s = keys.singleton;
  const task = { ...planned.task, singletonKey: s.key };
  const r = await batcher.insertAlone(task, (notify) => store.startSingleton(task, notify));
  if (r.held === 'singleton') {
    if (s.mode === 'refuse') throw new SingletonRunningError(name, s.key, r.task.id);
    return { id: r.task.id, workflow: name, status: r.task.status, created: false };
  }
  // Created, or the task its idempotency key names (checked as any start's key is).
  return startResult({ ...planned, task }, r);
}

/**
 * `engine.retry` of a failed task that holds a key again once pending: a singleton task while
 * another live task holds its key (SINGLETON_RUNNING), or a debounced task that never ran (it
 * would collect starts again) while another task of its key collects them (CONFLICT).
 */
export async function checkKeysFree(store: Store, row: TaskRow): Promise<void> {
  if (row.singletonKey !== null) {
    const live = await store.liveSingleton(row.workflow, row.singletonKey);
    if (live && live.id !== row.id) throw new SingletonRunningError(row.workflow, row.singletonKey, live.id);
  }
  if (row.debounceKey !== null && row.runs === 0) {
    const held = await store.unclaimedDebounced(row.workflow, row.debounceKey);
    if (held && held.id !== row.id) {
      throw new ConflictError(
        `Task ${row.id} is a debounced task that never ran: retried, it would collect the starts of debounce key "${row.debounceKey}" again, which task ${held.id} collects now. Let that task run (or cancel it) first.`,
      );
    }
  }
}
