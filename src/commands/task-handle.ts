/**
 * @module commands/task-handle
 * What `engine.start` answers: the started task, with `result()` typed by the workflow's output.
 */
import type { TaskStatus } from '../lifecycle.ts';
import type { ResultOptions, StartResult } from './options.ts';

/** The engine as a task handle uses it. */
export interface ResultSource {
  result<O>(id: string, options?: ResultOptions): Promise<O>;
}

/**
 * A started task: what `start()` reports, and `result()` typed by the workflow's output when the
 * task was started from its definition (`engine.start(definition, input)`).
 */
export class TaskHandle<O = unknown> implements StartResult {
  readonly id: string;
  readonly workflow: string;
  readonly status: TaskStatus;
  readonly created: boolean;
  readonly #engine: ResultSource;
  /** @internal */
  constructor(engine: ResultSource, r: StartResult) {
    this.#engine = engine;
    this.id = r.id;
    this.workflow = r.workflow;
    this.status = r.status;
    this.created = r.created;
  }
  /** Waits for the task to finish: see {@link Engine.result}. */
  result(options?: ResultOptions): Promise<O> {
    return this.#engine.result<O>(this.id, options);
  }
  toJSON(): StartResult {
    return { id: this.id, workflow: this.workflow, status: this.status, created: this.created };
  }
}
