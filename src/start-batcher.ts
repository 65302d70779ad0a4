/**
 * @module start-batcher
 * Internal: not part of the public API (the package exports only its index modules).
 * Group commit for task creation: `engine.start()` calls made while a batch is being written (or
 * in the same tick) are inserted together, one statement and one commit per batch
 * (`Store.insertTasks`), with one wake-up announcement per batch instead of one per task. Each call
 * still gets its own answer: its task (created, or the one its idempotency key already names) or
 * its own error. A batch that fails for a reason other than the store being unavailable is tried
 * again one task at a time, so that a task the database refuses fails only its own call.
 */
import { ERROR_CODES, isStepwiseError } from './errors.ts';
import type { NewTask, Store, TaskRow, WakeEvent } from './store.ts';
import { batchWakeOfRows } from './transitions.ts';
import { GroupCommit, type Pending as Queued } from './group-commit.ts';

export type Inserted = { task: TaskRow; created: boolean };

type Pending = Queued<NewTask, Inserted>;

export interface StartBatcherOptions {
  /** Most tasks in one statement. @defaultValue 1000 */
  maxBatch?: number;
  /** Called once per committed batch with the tasks it created (none: not called). */
  onCreated?: (tasks: readonly TaskRow[]) => void;
  /**
   * Stamped on each batch's announcement (`WakeEvent.origin`): the engine whose `onCreated` tells
   * its own workers, so that it ignores the echo.
   */
  origin?: string;
}

/** The announcement of a batch: the workflow when all its tasks share one, else any workflow. */
function batchWake(tasks: readonly NewTask[], origin: string | undefined): WakeEvent | undefined {
  const wake = tasks.length === 1 ? tasks[0]?.notify : batchWakeOfRows(tasks);
  return wake && origin !== undefined ? { ...wake, origin } : wake;
}

export class StartBatcher {
  readonly #store: Store;
  readonly #onCreated: ((tasks: readonly TaskRow[]) => void) | undefined;
  readonly #origin: string | undefined;
  readonly #group: GroupCommit<NewTask, Inserted>;

  constructor(store: Store, options: StartBatcherOptions = {}) {
    this.#store = store;
    this.#group = new GroupCommit((batch) => this.#commit(batch), Math.max(1, options.maxBatch ?? 1000));
    this.#onCreated = options.onCreated;
    this.#origin = options.origin;
  }

  /** Inserts `task` with the other starts of this tick (or of the batch being written). */
  insert(task: NewTask): Promise<Inserted> {
    return this.#group.enqueue(task);
  }

  /**
   * Inserts `tasks` now, in statements of up to `chunk` tasks (a list of that size or less is one
   * statement: one round trip, one commit), results in order.
   */
  async insertMany(tasks: readonly NewTask[], chunk = 10_000): Promise<Inserted[]> {
    const out: Inserted[] = [];
    for (let i = 0; i < tasks.length; i += chunk) out.push(...(await this.#write(tasks.slice(i, i + chunk))));
    return out;
  }

  /**
   * A start written by a statement of its own (a debounced or singleton start, `write`), told to
   * this process and announced to others (`notify`, for the store to send if it creates the task)
   * as a batch of one would be.
   */
  async insertAlone<T extends Inserted>(task: NewTask, write: (notify: WakeEvent | undefined) => Promise<T>): Promise<T> {
    const result = await write(batchWake([task], this.#origin));
    if (result.created) this.#onCreated?.([result.task]);
    return result;
  }

  async #commit(batch: Pending[]): Promise<void> {
    try {
      const results = await this.#write(batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i] as Inserted));
    } catch (e) {
      if (batch.length === 1 || isStepwiseError(e, ERROR_CODES.STORE_UNAVAILABLE)) {
        for (const p of batch) p.reject(e);
        return;
      }
      // Each call gets its own answer: the tasks the database accepts are created.
      await Promise.all(
        batch.map(async (p) => {
          try {
            p.resolve(((await this.#write([p.item])) as Inserted[])[0] as Inserted);
          } catch (err) {
            p.reject(err);
          }
        }),
      );
    }
  }

  async #write(tasks: readonly NewTask[]): Promise<Inserted[]> {
    if (!tasks.length) return [];
    const results = await this.#store.insertTasks(tasks, batchWake(tasks, this.#origin));
    const created = results.filter((r) => r.created).map((r) => r.task);
    if (created.length) this.#onCreated?.(created);
    return results;
  }
}
