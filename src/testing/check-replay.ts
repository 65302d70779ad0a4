/**
 * @module testing/check-replay
 * `checkReplay(engine, taskId)`: replays a task's recorded journal against the current code of its
 * workflow, with no side effect, and says whether the code still makes the calls the journal
 * recorded (Temporal's replayer): run it over tasks of the database before deploying a change.
 *
 * The task (its input and journal rows, and its approval records) is copied into a scratch
 * database in memory, and a worker of the current code replays it there. Recorded results are
 * handed back as in any resumed run; the first thing the code does that the journal does not
 * hold stops the worker on the spot, as `checkResume`'s crash does (`Worker.abandon`, and a store
 * that answers nothing more): a step about to start (its function is never called), or the run's
 * first write. For a task that succeeded or failed, that write must be its end, with the same
 * output or error; for a task still under way (or cancelled), the code may go on past its journal.
 * NON_DETERMINISM, in any case, is a {@link ReplayCheckError}.
 */
import { toMs, type Duration } from '../duration.ts';
import { Engine } from '../engine.ts';
import { ERROR_CODES, InvalidArgumentError, StepwiseError, TaskNotFoundError, isStepwiseError } from '../errors.ts';
import { sourcesOf, transition, type TaskStatus } from '../lifecycle.ts';
import { decodeError, decodeJson } from '../serialize.ts';
import type { ApprovalRow, StepRow, Store, TaskRow, TransitionWrite, WriteOp } from '../store.ts';
import { openStore } from '../store-url.ts';
import { planCreation } from '../transitions.ts';
import { isWorkflow, workflow as defineWorkflow, type Workflow } from '../workflow.ts';
import { firstDifference, sameJson, show } from './compare.ts';
import { ProcessStore } from './crash-store.ts';
import { ManualClock } from './manual-clock.ts';
import { processClock, WORKER_OPTIONS } from './trial.ts';

export interface CheckReplayOptions {
  /** The code to replay the task against. @defaultValue the engine's definition of the task's workflow */
  workflow?: Workflow<any, any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Real time the replay may take. @defaultValue '10s' */
  timeout?: Duration;
}

export interface ReplayReport {
  taskId: string;
  workflow: string;
  /** The task's status when it was read. */
  status: TaskStatus;
  /** The version the task was started under, and the version of the code replayed. */
  recordedVersion: string;
  version: string;
  /**
   * Whether the code declares that it runs the task's version (its `version`, or one of its
   * `compatibleVersions`). If not, no worker of this code would take the task (it waits for workers
   * of its own version); the replay says whether it could.
   */
  served: boolean;
  /** Recorded results in the journal (each handed back to the code). */
  recorded: number;
  /**
   * `same-end`: the code ended as the task did (a task that succeeded or failed). `goes-on`: the
   * code replayed the journal and went on past it (a task under way, or cancelled): see `next`.
   */
  ended: 'same-end' | 'goes-on';
  /** What the code did past its journal: `step "notify" (attempt 1)`, `the park transition with …`; null for `same-end`. */
  next: string | null;
  /**
   * Recorded model calls (`stepwise-engine/ai`) the current code would make with another request
   * (prompt, model, tools or settings changed): their answers came from code that has changed.
   * In journal order; re-run from the first with `engine.retry(id, { fromStep: report.drift[0].step })`.
   */
  drift: DriftedCall[];
}

/** A recorded model call whose request the current code makes differently. */
export interface DriftedCall {
  /** The step id (`name`, or `name#2`). */
  step: string;
  model: string;
  recordedFingerprint: string;
  fingerprint: string;
}

/** The current code of a workflow does not replay a task's journal. */
export class ReplayCheckError extends StepwiseError {
  readonly taskId: string;
  readonly workflow: string;
  readonly reason: 'non-determinism' | 'new-call' | 'other-end' | 'not-finished';
  constructor(message: string, fields: { taskId: string; workflow: string; reason: ReplayCheckError['reason'] }) {
    super(ERROR_CODES.REPLAY_CHECK_FAILED, message);
    this.name = 'ReplayCheckError';
    this.taskId = fields.taskId;
    this.workflow = fields.workflow;
    this.reason = fields.reason;
  }
}

/** Whether `e` is a {@link ReplayCheckError} (by its code). */
export function isReplayCheckError(e: unknown): e is ReplayCheckError {
  return isStepwiseError(e, ERROR_CODES.REPLAY_CHECK_FAILED);
}

const IMPORTER = 'check-replay-import';

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
  const source = await engine.ready();
  const row = await source.getTask(taskId);
  if (!row) throw new TaskNotFoundError(taskId);
  const current = (options.workflow ?? engine.workflows.get(row.workflow)) as Workflow | undefined;
  if (!current) throw new InvalidArgumentError(`checkReplay: workflow "${row.workflow}" of task ${taskId} is not registered with this engine: pass options.workflow.`);
  if (current.name !== row.workflow) throw new InvalidArgumentError(`checkReplay: task ${taskId} is of workflow "${row.workflow}", not "${current.name}".`);
  const [steps, approvals] = await Promise.all([source.getSteps(taskId), source.listApprovals({ taskId, limit: 1000 })]);
  const versions = [current.version, ...(current.options.compatibleVersions ?? []).map(String)];
  const served = versions.includes(row.workflowVersion);
  // Replayed whatever it declares, so that the replay says whether it could run the task.
  const code = served ? current : defineWorkflow(current.name, current.fn, { ...current.options, compatibleVersions: [...(current.options.compatibleVersions ?? []), row.workflowVersion] });
  const report = {
    taskId,
    workflow: row.workflow,
    status: row.status,
    recordedVersion: row.workflowVersion,
    version: current.version,
    served,
    recorded: steps.filter((s) => s.done !== null).length,
  };
  const where = `checkReplay("${row.workflow}", task ${taskId}, recorded under version ${row.workflowVersion}, replayed by version ${current.version})`;
  const fail = (reason: ReplayCheckError['reason'], text: string): ReplayCheckError => new ReplayCheckError(`${where}: ${text}`, { taskId, workflow: row.workflow, reason });

  const clock = new ManualClock(row.finishedAt ?? engine.clock.now());
  const scratch = await openStore('sqlite::memory:');
  let view: ProcessStore | null = null;
  try {
    await scratch.migrate();
    await importTask(scratch, row, steps, approvals, clock.now());
    let newCall: string | null = null;
    const drift: DriftedCall[] = [];
    let died!: () => void;
    const stopped = new Promise<void>((resolve) => (died = resolve));
    let worker: ReturnType<Engine['worker']> | null = null;
    const v = new ProcessStore(scratch, { write: 1, when: 'before' }, () => {
      worker?.abandon();
      died();
    });
    view = v;
    const replayer = new Engine({ store: v.store, workflows: [code], clock: processClock(clock, () => !v.dead) });
    worker = replayer.worker({ ...WORKER_OPTIONS, workerId: 'check-replay' });
    worker.on('model:drift', (e) => void drift.push({ step: e.step, model: e.model, recordedFingerprint: e.recordedFingerprint, fingerprint: e.fingerprint }));
    worker.on('step:started', (e) => {
      if (v.dead) return;
      newCall = `step "${e.step}" (attempt ${e.attempt})`;
      v.die(); // before the step's function is called: it never is
    });
    await worker.start();
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([stopped.then(() => true), new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)))]);
    clearTimeout(timer);
    if (!finished) {
      v.die();
      throw fail('not-finished', `the replay did not reach the end of the journal within ${timeoutMs} ms (a workflow that awaits something other than ctx calls between steps?).`);
    }
    const finishedTask = row.status === 'succeeded' || row.status === 'failed';
    const end = endOf(v);
    if (end?.event === 'fail' && errorOf(end)?.code === 'NON_DETERMINISM') {
      throw fail('non-determinism', `the code does not replay the journal: ${errorOf(end)?.message ?? ''}`);
    }
    const next = newCall ?? (end ? null : (v.writes[0]?.what ?? null));
    if (finishedTask) {
      if (next !== null) {
        throw fail(
          'new-call',
          `the task ${row.status}, but the code went on past its journal: ${next}. The code makes a call the recorded run did not make (a step added, or a branch taken otherwise).`,
        );
      }
      const other = otherEnd(row, end);
      if (other) throw fail('other-end', other);
      return { ...report, ended: 'same-end', next: null, drift };
    }
    return { ...report, ended: 'goes-on', next: next ?? v.writes[0]?.what ?? null, drift };
  } finally {
    await view?.settled();
    await scratch.close();
  }
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

/** Copies the task into the scratch database: the row, its journal (fenced by a claim of its own) and its approvals. */
async function importTask(store: Store, row: TaskRow, steps: readonly StepRow[], approvals: readonly ApprovalRow[], now: number): Promise<void> {
  const created = planCreation({ kind: 'system', id: IMPORTER });
  await store.insertTask({
    id: row.id,
    workflow: row.workflow,
    workflowVersion: row.workflowVersion,
    input: row.input,
    idempotencyKey: null,
    runAt: now,
    createdAt: row.createdAt,
    deadlineAt: row.deadlineAt,
    status: created.status,
    usage: row.usage,
    log: created.log,
  });
  const reclaimFrom = sourcesOf('reclaim');
  const [claimed] = await store.claim({
    workerId: IMPORTER,
    now,
    leaseMs: 60_000,
    limit: 1,
    workflows: [row.workflow],
    claim: { from: sourcesOf('claim'), to: transition({ status: 'pending' }, 'claim').to },
    reclaim: { from: reclaimFrom, to: Object.fromEntries(reclaimFrom.map((s) => [s, transition({ status: s }, 'reclaim').to])) },
  });
  if (!claimed) throw new Error(`checkReplay: the copy of task ${row.id} could not be claimed in the scratch database`);
  const epoch = claimed.task.epoch;
  if (steps.length) {
    const ops: WriteOp[] = steps.map((s) => ({ kind: 'step', taskId: row.id, epoch, step: { ...s, epoch } }));
    const results = await store.writeBatch(ops);
    if (results.some((r) => r !== true)) throw new Error(`checkReplay: the journal of task ${row.id} could not be copied into the scratch database`);
  }
  for (const approval of approvals) await store.insertApproval({ approval, epoch, at: now, log: [] });
  await store.endLeasesOf(IMPORTER, now);
}

/** The run's end, if the write the replay stopped at is one: a transition that carries no new row. */
function endOf(v: ProcessStore): TransitionWrite | null {
  const args = v.deathArgs;
  if (!args) return null;
  const ops: WriteOp[] = Array.isArray(args[0]) ? (args[0] as WriteOp[]) : [args[0] as WriteOp];
  const op = ops.find((o) => o.kind === 'transition');
  if (!op || op.kind !== 'transition' || op.steps?.length) return null;
  return op.event === 'complete' || op.event === 'fail' ? op : null;
}

function errorOf(t: TransitionWrite): { name: string; code: string | null; message: string } | null {
  if (!t.set.error) return null;
  const e = decodeError(t.set.error);
  return { name: e.name, code: e.code ?? null, message: e.message };
}

/** How the replay's end differs from the task's, or null. */
function otherEnd(row: TaskRow, end: TransitionWrite | null): string | null {
  if (!end) return 'the replay stopped before the code ended.';
  if (row.status === 'succeeded') {
    if (end.event !== 'complete') return `the task succeeded, but the code now fails: ${show(errorOf(end))}.`;
    const was = decodeJson(row.output);
    const now = end.set.output === undefined ? undefined : decodeJson(end.set.output);
    if (sameJson(was, now)) return null;
    const d = firstDifference(was, now);
    return `the code returns another output${d ? ` at ${d.path || 'the top'}: ${show(d.a)} recorded, ${show(d.b)} now` : ''}.`;
  }
  if (end.event !== 'fail') return `the task failed, but the code now succeeds with ${show(end.set.output === undefined ? undefined : decodeJson(end.set.output))}.`;
  const was = row.error ? decodeError(row.error) : null;
  const now = errorOf(end);
  if (was && now && (was.code ?? null) === now.code && was.message === now.message) return null;
  return `the code fails otherwise: ${show(now)} now, ${show(was && { name: was.name, code: was.code ?? null, message: was.message })} recorded.`;
}
