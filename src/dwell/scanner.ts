/**
 * @module dwell/scanner
 * Internal: not part of the public API (the package exports only its index modules).
 * The one scanner of dwell timeouts. Each `scan()` (run by the worker's periodic scheduler every
 * `dwellScanMs` of real time, to find tasks that entered a bounded status since, and again when
 * the earliest bound the last scan saw passes, on the engine's clock, so a manual clock moves it)
 * looks at the waiting, paused and running tasks of the workflows that set `dwell`, and for each that has stayed past its bound it fails it, cancels it, or records an
 * alert. A waiting or paused task's stay starts at `updatedAt` (when it entered the status); a
 * running task's at its last sign of progress: the latest of `updatedAt` (the run started or was
 * reclaimed), the `at` of its last progress report, and the end of its last finished step (read
 * from the journal only once the first two are past the bound). Failing is the lifecycle's
 * `expire`: a waiting or paused task fails, or is made due for a worker to fail it after running its
 * compensations; a running one keeps its status with its error, and its stalled run is fenced off (a
 * new epoch, the lease expired: it may write nothing more), so that the worker that reclaims it fails
 * it at its start after replaying it: its compensations run and its children are cancelled as for
 * any failure;
 * cancelling is the user's `cancel` (a running task goes through `cancelling`, its run
 * aborted). Each is a `dwell:exceeded` entry in the task's log (actor system
 * `dwell-timeout`), written with the transition, or on its own for an alert, once per stay: every
 * write is guarded by the task's version, so two scanners never act twice.
 */
import type { Clock } from '../clock.ts';
import { DwellTimeoutError } from '../errors.ts';
import { toMs } from '../duration.ts';
import { encodeError } from '../serialize.ts';
import type { NewEvent, Store, TaskRow } from '../store.ts';
import { planTransition, wakeFor } from '../transitions.ts';
import type { Workflow } from '../workflow.ts';
import { DWELL_STATUSES, type DwellAlert, type DwellBound, type DwellStatus } from './types.ts';

const ACTOR = { kind: 'system' as const, id: 'dwell-timeout' };
/** Tasks looked at per workflow and status per scan. */
const PAGE = 500;

export interface DwellHost {
  store: Store;
  clock: Clock;
  workflows: () => Iterable<Workflow>;
  /** A task was made runnable or finished here: tell this process's waiters. */
  changed: (taskId: string) => void;
  /** A running task was cancelled here: abort its run if this process holds it. */
  cancelled: (taskId: string, reason: string) => void;
  /** An `alert` bound was passed (once per stay): told to the observers' `onDwellAlert`. */
  alerted?: (alert: DwellAlert) => void;
}

function entry(status: string, afterMs: number, since: number, outcome: DwellBound['then']): NewEvent {
  return { type: 'dwell:exceeded', actorKind: ACTOR.kind, actorId: ACTOR.id, data: JSON.stringify({ status, afterMs, since, outcome }) };
}

export class DwellScanner {
  readonly #host: DwellHost;

  constructor(host: DwellHost) {
    this.#host = host;
  }

  /** One pass over every bounded workflow and status; returns the earliest bound still ahead, if any. */
  async scan(): Promise<number | null> {
    const { store, clock } = this.#host;
    let next: number | null = null;
    for (const wf of this.#host.workflows()) {
      const dwell = wf.options.dwell;
      if (!dwell) continue;
      for (const status of DWELL_STATUSES) {
        const bound = dwell[status];
        if (!bound) continue;
        const afterMs = toMs(bound.after);
        const tasks = await store.listTasks({ statuses: [status], workflow: wf.name, limit: PAGE });
        for (const task of tasks) {
          // A running task failed already awaits the worker that reclaims it and fails it (see `#act`).
          if (status === 'running' && task.error !== null) continue;
          const since = status === 'running' ? await this.#lastProgress(task, afterMs) : task.updatedAt;
          const due = since + afterMs;
          if (due <= clock.now()) await this.#act(task, status, afterMs, bound.then, since);
          else next = next === null ? due : Math.min(next, due);
        }
      }
    }
    return next;
  }

  /**
   * When the running task last showed progress: its start or a progress report; when those are
   * past the bound, also the end of its last finished step (a journal read only for such tasks).
   */
  async #lastProgress(task: TaskRow, afterMs: number): Promise<number> {
    let since = task.updatedAt;
    if (task.progress) {
      const at = Number((JSON.parse(task.progress) as { at?: unknown }).at);
      if (Number.isFinite(at)) since = Math.max(since, at);
    }
    if (since + afterMs > this.#host.clock.now()) return since;
    for (const step of await this.#host.store.getSteps(task.id)) {
      if (step.finishedAt !== null && step.status !== 'waiting') since = Math.max(since, step.finishedAt);
    }
    return since;
  }

  async #act(task: TaskRow, status: DwellStatus, afterMs: number, outcome: DwellBound['then'], since: number): Promise<void> {
    const { store, clock } = this.#host;
    const at = clock.now();
    const exceeded = entry(status, afterMs, since, outcome);
    if (outcome === 'alert') {
      // Once per stay (for running: per stall): an alert with the same status and start is not repeated.
      const log = await store.getEvents(task.id);
      const raised = log.some((e) => {
        if (e.type !== 'dwell:exceeded' || !e.data) return false;
        const d = JSON.parse(e.data) as { status: string; since: number };
        return d.status === status && d.since === since;
      });
      if (raised) return;
      if (await store.appendEvents({ taskId: task.id, version: task.version, at, log: [exceeded] })) {
        this.#host.alerted?.({ taskId: task.id, workflow: task.workflow, status, afterMs, since, at });
      }
      return;
    }
    const reason = status === 'running' ? `ran longer than ${afterMs}ms without progress (dwell.running)` : `stayed ${status} longer than ${afterMs}ms (dwell.${status})`;
    const event = outcome === 'cancel' ? 'cancel' : 'expire';
    const { write } = planTransition({
      taskId: task.id,
      state: task,
      event,
      guard: { version: task.version },
      at,
      actor: ACTOR,
      set: outcome === 'fail' ? { error: encodeError(new DwellTimeoutError(task.id, status === 'running' ? 'running without progress' : status, afterMs)) } : { cancelReason: reason },
      detail: { reason, dwell: { status, afterMs, since } },
      notify: (edge) => wakeFor(edge, task.id, task.workflow, reason),
      parentId: task.parentId,
    });
    write.log = [...write.log, exceeded];
    // A task that moved meanwhile (decided, resumed, finished) is left alone: the guard refuses the write.
    if (!(await store.transition(write))) return;
    if (status === 'running' && event === 'cancel') this.#host.cancelled(task.id, reason);
    this.#host.changed(task.id);
  }
}
