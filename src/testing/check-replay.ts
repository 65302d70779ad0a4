/**
 * @module testing/check-replay
 * `checkReplay(engine, taskId)`: replays a task's recorded journal against the current code of its
 * workflow, with no side effect, and says whether the code still makes the calls the journal
 * recorded (Temporal's replayer): run it over tasks of the database before deploying a change.
 * The replay itself is `replay/replay-task.ts` (also behind `engine.drift`).
 */
import { toMs, type Duration } from '../duration.ts';
import type { Engine } from '../engine.ts';
import { InvalidArgumentError } from '../errors.ts';
import { isWorkflow, type Workflow } from '../workflow.ts';
import { replayTask, type ReplayReport } from '../replay/replay-task.ts';

export { ReplayCheckError, isReplayCheckError } from '../errors.ts';
export type { ReplayReport, DriftedCall } from '../replay/replay-task.ts';

export interface CheckReplayOptions {
  /** The code to replay the task against. @defaultValue the engine's definition of the task's workflow */
  workflow?: Workflow<any, any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Real time the replay may take. @defaultValue '10s' */
  timeout?: Duration;
}

/**
 * Replays task `taskId` of `engine`'s database against the current code of its workflow, without
 * side effects (no step function runs, nothing is written to that database). Throws
 * {@link ReplayCheckError} if the code diverges from the journal (NON_DETERMINISM), makes a call
 * that a finished task's journal does not hold, or ends a finished task otherwise than it ended.
 * @example
 * for (const t of (await engine.list({ workflow: 'publish-article', limit: 100 })).tasks) await checkReplay(engine, t.id);
 */
export async function checkReplay(engine: Engine, taskId: string, options: CheckReplayOptions = {}): Promise<ReplayReport> {
  const timeoutMs = checkArguments(engine, taskId, options);
  const source = { open: () => engine.ready(), clock: engine.clock, workflows: engine.workflows, engine };
  return replayTask(source, taskId, { workflow: options.workflow as Workflow | undefined, timeoutMs, caller: 'checkReplay' });
}

/** Refuses arguments checkReplay cannot use; returns the timeout in milliseconds. */
function checkArguments(engine: Engine, taskId: string, options: CheckReplayOptions): number {
  // (Not instanceof: an engine made by another copy of the package is an engine too.)
  if (typeof (engine as Partial<Engine> | null)?.ready !== 'function' || !((engine as Partial<Engine>).workflows instanceof Map)) {
    throw new InvalidArgumentError('checkReplay(engine, taskId): the first argument must be an Engine.');
  }
  if (typeof taskId !== 'string' || !taskId) throw new InvalidArgumentError('checkReplay(engine, taskId): a task id is required.');
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('checkReplay: options must be an object.');
  const unknown = Object.keys(options).filter((k) => k !== 'workflow' && k !== 'timeout');
  if (unknown.length) throw new InvalidArgumentError(`checkReplay: unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (known: workflow, timeout).`);
  if (options.workflow !== undefined && !isWorkflow(options.workflow)) throw new InvalidArgumentError('checkReplay: options.workflow must be a workflow made by workflow(name, fn).');
  return options.timeout === undefined ? 10_000 : toMs(options.timeout, 'checkReplay: timeout');
}
