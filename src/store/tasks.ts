/**
 * @module store/tasks
 * Tasks: their creation (one or a batch, deduplicated by idempotency key) and their reads.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { NewEvent } from './log.ts';
import type { StepRow, TaskRow } from './rows.ts';
import type { WakeEvent } from './wake.ts';

export interface NewTask {
  id: string;
  workflow: string;
  workflowVersion: string;
  input: string | null;
  idempotencyKey: string | null;
  runAt: number;
  createdAt: number;
  /** When the task must be finished (ms), or null. */
  deadlineAt?: number | null;
  /** The status it starts in (the lifecycle's `CREATION`). */
  status: TaskStatus;
  /** The initial `usage` column (a per-start budget), or null. */
  usage?: string | null;
  /** A short text naming the task for people, or null. */
  title?: string | null;
  /** A debounced start's key (written only by `startDebounced`). */
  debounceKey?: string | null;
  /** A singleton start's key (written only by `startSingleton`). */
  singletonKey?: string | null;
  /** The per-key concurrency limit's key and limit (see `TaskRow.concurrencyKey`), or absent. */
  concurrencyKey?: string | null;
  concurrencyLimit?: number | null;
  /** 0..1000, higher first. @defaultValue 0 */
  priority?: number;
  /** A child task's parent, root and depth (see `TaskRow.parentId`); absent for a task started from outside. */
  parentId?: string | null;
  rootId?: string | null;
  depth?: number;
  /** Its tags, each a row of the tag index too. */
  tags?: Readonly<Record<string, string>> | null;
  /** The task it is a fork of (`engine.fork`). */
  forkedFrom?: string | null;
  /** The log entry of its creation (seq 1), written with the row. */
  log: NewEvent;
  /** Announced to other processes if the task was created. */
  notify?: WakeEvent;
}

/** Where a due task stands in the claim order (for `explain`). */
export interface QueuePosition {
  /** Tasks of its key holding a lease (null: no key). */
  keyLeased: number | null;
  /** Due tasks of its key before it in due order, held or not, counted up to its limit (null: no key). */
  keyAhead: number | null;
  /** Due tasks before it in claim order with a higher priority (held ones do not go first). */
  aheadByPriority: number;
}

/** A change of a task's tags (`ctx.setTags`, `engine.setTags`). */
export interface TagChange {
  /** Tags to add or overwrite. */
  set: Readonly<Record<string, string>>;
  /** Keys to remove. */
  remove: readonly string[];
  /** Only while the task is leased at this epoch (a run's own change); absent: any status. */
  epoch?: number;
  /** Refuse the change (nothing written) if the task would have more tags than this. */
  max: number;
}

export interface ListQuery {
  statuses?: readonly TaskStatus[];
  workflow?: string;
  limit: number;
  /** Only the children of this task. */
  parent?: string;
  /** Only the tasks of this tree below its first task (`root_id`). */
  root?: string;
  /** Return tasks with ids below this one (ids are time-ordered; newest first). */
  before?: string;
  /** Only tasks with all of these tags (key, value). */
  tags?: ReadonlyArray<readonly [string, string]>;
  /** Only tasks created at or after this time (ms). */
  createdAfter?: number;
  /** Only tasks created before this time (ms). */
  createdBefore?: number;
  /** Only failed tasks whose error, or its cause, has this `code`. */
  failedWith?: string;
  /**
   * Only tasks whose id, workflow, title, tags, input or error contain this text (case-insensitive
   * for ASCII): a scan, bounded by the other terms and the page.
   */
  text?: string;
}

/** Creating and reading tasks and journals. */
export interface TaskStore {
  insertTask(task: NewTask): Promise<{ task: TaskRow; created: boolean }>;
  /**
   * Many tasks in one transaction (one multi-row statement where the dialect allows), each as
   * {@link insertTask} would insert it, results in the order given: a task whose idempotency key
   * exists (or was taken by an earlier task of the same batch) comes back as the existing task,
   * `created: false`. The tasks' own `notify` is ignored: `notify`, if given, is announced once,
   * if at least one task was created.
   */
  insertTasks(tasks: readonly NewTask[], notify?: WakeEvent): Promise<Array<{ task: TaskRow; created: boolean }>>;
  getTask(id: string): Promise<TaskRow | null>;
  /**
   * The tasks of `ids` that exist, each once, in any order, read together (one statement on
   * PostgreSQL). Optional: without it, `engine.result()` reads each task with `getTask`.
   */
  getTasks?(ids: readonly string[]): Promise<TaskRow[]>;
  findTaskByKey(idempotencyKey: string): Promise<TaskRow | null>;
  /**
   * Why a due task waits (for `explain`): the tasks of its concurrency key holding a lease now
   * (null without a key), and the due tasks ahead of it in claim order with a higher priority.
   * Optional: without it `explain` does not say.
   */
  queuePosition?(task: TaskRow, now: number): Promise<QueuePosition>;
  listTasks(query: ListQuery): Promise<TaskRow[]>;
  /**
   * Applies `change` to the task's tags (the row's `tags` and the tag index's rows, in one
   * transaction). Returns the tags after it; 'too-many' (nothing written) if they would be more than
   * `change.max`; null if there is no such task or it is not leased at `change.epoch`.
   */
  setTags(taskId: string, change: TagChange): Promise<Record<string, string> | 'too-many' | null>;
  /**
   * Creates `task` (as {@link insertTask}; its `forkedFrom` names the source) with copies of the
   * source's journal rows at `seqs`, in one transaction. The copies carry no log entry (the
   * fork's log starts with its own creation) and belong to epoch 0 (before the fork's first claim).
   */
  forkTask(task: NewTask & { forkedFrom: string }, seqs: readonly number[]): Promise<TaskRow>;
  getSteps(taskId: string): Promise<StepRow[]>;
}
