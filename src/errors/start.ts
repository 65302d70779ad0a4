/**
 * @module errors/start
 * A start refused because of the tasks already holding its key: a singleton start while a live
 * task of its workflow holds the key.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError } from './base.ts';

/**
 * `engine.start(…, { singleton })` (mode `refuse`, the default) while a task of the workflow with
 * that key has not ended, or `engine.retry` of a failed singleton task while another holds its key.
 * Nothing was created. `runningTaskId`: the live task.
 */
export class SingletonRunningError extends StepwiseError {
  readonly workflow: string;
  readonly key: string;
  readonly runningTaskId: string;
  constructor(workflow: string, key: string, runningTaskId: string) {
    super(
      ERROR_CODES.SINGLETON_RUNNING,
      `Workflow "${workflow}" already has a live task with singleton key "${key}": task ${runningTaskId}. Wait for it to end, cancel it, or start with singleton: { key, mode: 'join' } to get that task instead.`,
    );
    this.name = 'SingletonRunningError';
    this.workflow = workflow;
    this.key = key;
    this.runningTaskId = runningTaskId;
  }
}
