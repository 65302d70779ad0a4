/**
 * @module replay/replay-task
 * Replays a task's recorded journal against the current code of its workflow, with no side
 * effect, and says whether the code still makes the calls the journal recorded (Temporal's
 * replayer), and which recorded model calls it would now make with another request (drift).
 *
 * The task (its input and journal rows, and its approval records) is copied into a scratch
 * database in memory, and a worker of the current code replays it there. Recorded results are
 * handed back as in any resumed run; the first thing the code does that the journal does not
 * hold stops the worker on the spot (`Worker.abandon`, and a store that answers nothing more): a
 * step about to start (its function is never called), or the run's first write. For a task that
 * succeeded or failed, that write must be its end, with the same output or error; for a task
 * still under way (or cancelled), the code may go on past its journal. NON_DETERMINISM, in any
 * case, is a ReplayCheckError.
 */
import type { Clock } from '../clock.ts';
import { ConflictError, ERROR_CODES, InvalidArgumentError, ReplayCheckError, TaskNotFoundError, type ReplayFailure } from '../errors.ts';
import type { TaskStatus } from '../lifecycle.ts';
import { ManualClock } from '../manual-clock.ts';
import type { Store } from '../store.ts';
import { openStore } from '../store-url.ts';
import type { Worker, WorkerOptions } from '../worker.ts';
import { workflow as defineWorkflow, type Workflow } from '../workflow.ts';
import { EngineCore } from '../commands/core.ts';
import { importTask } from './journal-copy.ts';
import { endOf, errorOf, otherEnd } from './replay-end.ts';
import { SIMULATED_WORKER, processClock } from './process-clock.ts';
import { ProcessStore } from './process-store.ts';
import { withResolvers } from '../resolvers.ts';

/** What a replay reads from: the engine's store, clock and workflows, and the Engine (workflow code's `engineOf(ctx)`). */
export interface ReplaySource {
  open(): Promise<Store>;
  readonly clock: Clock;
  readonly workflows: ReadonlyMap<string, Workflow>;
  readonly engine: object;
}

export interface ReplayOptions {
  /** The code to replay the task against (default: the source's definition of its workflow). */
  workflow?: Workflow | undefined;
  /** Real time the replay may take. */
  timeoutMs: number;
  /** Who asks, for messages: `checkReplay`, `engine.drift`. */
  caller: string;
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
   * In journal order; re-run from the first with `engine.retry(id, { fromStep: 'first-drift' })`.
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

/** The replay's worker: a simulated process's, that waits for a call as long as the replay may take (a busy server is slow, not divergent). */
const replayWorker = (timeoutMs: number): WorkerOptions => ({ ...SIMULATED_WORKER, workerId: 'replay', replayStallMs: timeoutMs });

/** What workflow code calling the engine (`engineOf(ctx)`) outside a step gets in a replay. */
function refused(): never {
  throw new ConflictError('A replay runs no command: the workflow code called the engine outside a step (engineOf(ctx)), which a replay never lets reach the database.');
}

/**
 * The Engine as replayed code sees it: still an Engine (`engineOf(ctx)` at the top of a workflow
 * works, and steps, which never run in a replay, may hold it), but every method refuses, so the
 * replay cannot act on the real database.
 */
function commandless(engine: object): object {
  return new Proxy(engine, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? refused : value;
    },
  });
}

/**
 * Replays task `taskId` of the source's database against the current code of its workflow,
 * without side effects (no step function runs, nothing is written to that database). Throws
 * ReplayCheckError if the code diverges from the journal (NON_DETERMINISM), makes a call that a
 * finished task's journal does not hold, or ends a finished task otherwise than it ended.
 */
export async function replayTask(source: ReplaySource, taskId: string, options: ReplayOptions): Promise<ReplayReport> {
  const store = await source.open();
  const row = await store.getTask(taskId);
  if (!row) throw new TaskNotFoundError(taskId);
  const current = options.workflow ?? source.workflows.get(row.workflow);
  if (!current) {
    throw new InvalidArgumentError(
      `${options.caller}: workflow "${row.workflow}" of task ${taskId} is not registered with this engine, so its code cannot be replayed here: use an engine that has its code (new Engine({ workflows }); on the command line, --module <file>).`,
    );
  }
  if (current.name !== row.workflow) throw new InvalidArgumentError(`${options.caller}: task ${taskId} is of workflow "${row.workflow}", not "${current.name}".`);
  const [steps, approvals] = await Promise.all([store.getSteps(taskId), store.listApprovals({ taskId, limit: 1000 })]);
  const versions = [current.version, ...(current.options.compatibleVersions ?? []).map(String)];
  const served = versions.includes(row.workflowVersion);
  // Replayed whatever it declares, so that the replay says whether it could run the task.
  const code = served ? current : defineWorkflow(current.name, current.fn, { ...current.options, compatibleVersions: [...(current.options.compatibleVersions ?? []), row.workflowVersion] });
  const where = `${options.caller}("${row.workflow}", task ${taskId}, recorded under version ${row.workflowVersion}, replayed by version ${current.version})`;
  const fail = (reason: ReplayFailure, text: string): ReplayCheckError => new ReplayCheckError(`${where}: ${text}`, { taskId, workflow: row.workflow, reason });

  const clock = new ManualClock(row.finishedAt ?? source.clock.now());
  const scratch = await openStore('sqlite::memory:');
  let view: ProcessStore | null = null;
  try {
    await scratch.migrate();
    await importTask(scratch, row, steps, approvals, clock.now());
    const run = await runReplay(scratch, code, clock, source.engine, options.timeoutMs, (v) => (view = v));
    if (run === null)
      throw fail('not-finished', `the replay did not reach the end of the journal within ${options.timeoutMs} ms (a workflow that awaits something other than ctx calls between steps?).`);
    const end = endOf(run.view);
    if (end?.event === 'fail' && errorOf(end)?.code === ERROR_CODES.NON_DETERMINISM) throw fail('non-determinism', `the code does not replay the journal: ${errorOf(end)?.message ?? ''}`);
    const next = run.newCall ?? (end ? null : (run.view.writes[0]?.what ?? null));
    const report = {
      taskId,
      workflow: row.workflow,
      status: row.status,
      recordedVersion: row.workflowVersion,
      version: current.version,
      served,
      recorded: steps.filter((s) => s.done !== null).length,
    };
    if (row.status === 'succeeded' || row.status === 'failed') {
      if (next !== null) {
        throw fail(
          'new-call',
          `the task ${row.status}, but the code went on past its journal: ${next}. The code makes a call the recorded run did not make (a step added, or a branch taken otherwise).`,
        );
      }
      const other = otherEnd(row, end);
      if (other) throw fail('other-end', other);
      return { ...report, ended: 'same-end', next: null, drift: run.drift };
    }
    return { ...report, ended: 'goes-on', next: next ?? run.view.writes[0]?.what ?? null, drift: run.drift };
  } finally {
    await (view as ProcessStore | null)?.settled();
    await scratch.close();
  }
}

/**
 * Runs a worker of `code` over the scratch copy until it stops at its first new call or write;
 * null if it did not within `timeoutMs` (it is then stopped).
 */
async function runReplay(
  scratch: Store,
  code: Workflow,
  clock: ManualClock,
  engine: object,
  timeoutMs: number,
  made: (view: ProcessStore) => void,
): Promise<{ view: ProcessStore; newCall: string | null; drift: DriftedCall[] } | null> {
  let newCall: string | null = null;
  const drift: DriftedCall[] = [];
  const { promise: stopped, resolve: died } = withResolvers<void>();
  let worker: Worker | null = null;
  const v = new ProcessStore(scratch, { write: 1, when: 'before' }, () => {
    worker?.abandon();
    died();
  });
  made(v);
  const replayer = new EngineCore(
    { store: v.store, workflows: [code], clock: processClock(clock, () => !v.dead) },
    { start: refused, get: refused, cancel: refused, engine: commandless(engine) },
  );
  worker = replayer.worker(replayWorker(timeoutMs));
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
    return null;
  }
  return { view: v, newCall, drift };
}
