/**
 * @module worker/run-deps
 * Internal: not part of the public API.
 * What a worker hands each run of a claimed task (`RunDeps`), and the failure of a claimed task
 * whose run cannot even be constructed.
 */
import type { Clock } from '../clock.ts';
import type { ClaimedTask, Store, TaskPatch } from '../store.ts';
import type { RunDeps } from '../run/task-run.ts';
import type { RunInfo } from '../news.ts';
import type { Workflow } from '../workflow.ts';
import type { WriteBatcher } from '../write-batcher.ts';
import { workflowCode } from '../primitives/context.ts';
import { DEFAULT_LIMITS } from '../limits.ts';
import { planTransition, wakeFor } from '../transitions.ts';
import { encodeError } from '../serialize.ts';
import type { WorkerHost } from './host.ts';
import type { WorkerNewsDesk } from './news.ts';
import type { ResolvedOptions } from './options.ts';

/** The worker's parts every run uses. */
export interface RunDepsSource {
  host: WorkerHost;
  options: ResolvedOptions;
  store: Store;
  writer: WriteBatcher;
  workerId: string;
  news: WorkerNewsDesk;
  /** Until when the lease of a task is surely still held (the heartbeat's view). */
  safeUntil: (taskId: string) => number;
  /** Runs that park may be kept in memory (`keepParked` > 0). */
  keepParked: boolean;
}

/** How the runs of `wf` run its code, made once per workflow and engine. */
const codes = new WeakMap<Workflow, { engine: object | undefined; code: RunDeps['runCode'] }>();
function codeOf(wf: Workflow, engine: object | undefined): RunDeps['runCode'] {
  const known = codes.get(wf);
  if (known && known.engine === engine) return known.code;
  const code = workflowCode(wf, engine);
  codes.set(wf, { engine, code });
  return code;
}

/** The services of one run of `taskId` (`ending`: its code is over, only its last write is left). */
export function runDeps(src: RunDepsSource, taskId: string, wf: Workflow, info: RunInfo, ending: () => void): RunDeps {
  const { host, options: o, news } = src;
  return {
    store: src.store,
    writer: src.writer,
    clock: host.clock,
    workerId: src.workerId,
    parkAfterMs: o.parkAfterMs,
    cancelGraceMs: o.cancelGraceMs,
    leaseSafeUntil: () => src.safeUntil(taskId),
    emit: news.emitFor(info),
    hears: news.hears,
    rowsHeard: news.rowsHeard,
    outputBytes: host.outputBytes ?? DEFAULT_LIMITS.outputBytes,
    idempotency: host.idempotency,
    streamFrames: host.streamFrames?.keep ?? 'task',
    framesAppended: news.framesAppended,
    rateLimits: host.rateLimits,
    runCode: codeOf(wf, host.engine),
    replayStallMs: o.replayStallMs,
    ending,
    keepParked: src.keepParked,
  };
}

/** Ends a claim this worker cannot run, by `event` from the claimed status, fenced by the claim's epoch. */
async function endClaim(
  claimed: ClaimedTask,
  event: 'fail' | 'release',
  set: TaskPatch,
  detail: Record<string, unknown>,
  writer: WriteBatcher,
  clock: Clock,
  workerId: string,
): Promise<void> {
  const { write } = planTransition({
    taskId: claimed.task.id,
    state: claimed.task,
    event,
    guard: { epoch: claimed.task.epoch },
    at: clock.now(),
    set,
    detail,
    workerId,
    notify: (edge) => wakeFor(edge, claimed.task.id, claimed.task.workflow),
    parentId: claimed.task.parentId,
  });
  await writer.write(write);
}

/** Fails a claimed task whose run could not be constructed. */
export function failUnstartable(claimed: ClaimedTask, error: Error, writer: WriteBatcher, clock: Clock, workerId: string): Promise<void> {
  return endClaim(claimed, 'fail', { error: encodeError(error) }, { error: error.message }, writer, clock, workerId);
}

/**
 * Hands a claimed task back whose run could not start because its journal could not be read (the
 * claim left it out for a kept run that may not go on after all): a running task is due again at
 * once, a cancelling one is left for the next worker to take over, rather than held under this
 * worker's lease until it expires.
 */
export function releaseUnread(claimed: ClaimedTask, error: Error, writer: WriteBatcher, clock: Clock, workerId: string): Promise<void> {
  return endClaim(claimed, 'release', {}, { reason: `its journal could not be read: ${error.message}` }, writer, clock, workerId);
}

/** `claimed` with its journal, read now (the claim left it out: see `ClaimRequest.journals`). */
export async function withJournal(store: Store, claimed: ClaimedTask): Promise<ClaimedTask> {
  const steps = await store.getSteps(claimed.task.id);
  return { task: claimed.task, event: claimed.event, steps, signals: claimed.signals };
}
