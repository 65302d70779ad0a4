/**
 * @module worker/background
 * Internal: not part of the public API (the package exports only its index modules).
 * The work a worker does besides running tasks, every part a job of one {@link PeriodicScheduler}:
 * the dwell scanner (tasks past their workflow's `dwell` bounds; it also wakes when the earliest
 * bound it saw passes), closing the open approvals of ended tasks (approvals/closer.ts), deleting
 * expired idempotency records and finished tasks past their retention (sweeper.ts, retention/),
 * refreshing the worker's presence (presence.ts), releasing tasks held behind their keys
 * (key-release-job.ts).
 * Their errors are the worker's `worker:error` news, named by what was being done.
 */
import { closeEndedApprovals } from '../approvals/closer.ts';
import { systemClock } from '../clock.ts';
import { DwellScanner } from '../dwell/scanner.ts';
import { ClosedError, coerceError } from '../errors.ts';
import { DEFAULT_FRAMES_AFTER_END_MS } from '../stream-frames.ts';
import type { WorkerHost } from './host.ts';
import type { ResolvedOptions } from './options.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { NewsBus } from '../news.ts';
import type { Observer } from '../observers.ts';
import { resolveRetention, sweepDeletions, type RetentionMs } from '../retention/policy.ts';
import { reportPendingDeletions, sweepOnce } from '../retention/purge.ts';
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import { Sweeper } from '../sweeper.ts';
import { LAYERS } from '../payloads/layered-store.ts';
import type { Workflow } from '../workflow.ts';
import { PeriodicScheduler } from './periodic.ts';
import { PRESENCE_REFRESH_MS, presenceJob } from './presence.ts';
import { alertPurgeJob, alertsJob } from './alerts-job.ts';
import { keyReleaseJob } from './key-release-job.ts';
import { DEFAULT_ALERT_KEEP_MS } from '../alerts/options.ts';
import type { ResolvedAlerts } from '../alerts/options.ts';
import type { Alert } from '../alerts/types.ts';

export interface BackgroundHost {
  workerId: string;
  store: Store;
  clock: Clock;
  bus: NewsBus;
  workflows: ReadonlyMap<string, Workflow>;
  /** For the retention sweep's `onTasksDeleted`. */
  observers: readonly Observer[];
  idempotency: Idempotency | undefined;
  retention: RetentionMs;
  /** How long stream frames outlive their task's end; null: they are deleted when their stream finishes. */
  framesAfterEndMs: number | null;
  dwellScanMs: number;
  purgeMs: number;
  retentionSweepMs: number;
  scheduleScanMs: number;
  fireSchedules?: (workflows: ReadonlyMap<string, Workflow>) => Promise<number | null>;
  /** The engine's alerts (null: none). */
  alerts: ResolvedAlerts | null;
  /** How long a blob no task holds is kept (payloads/). */
  collectBlobsAfterMs: number;
  onError: (error: Error, during: string) => void;
}

/** A worker's background parts, started; `stop()` awaits what runs, `abandon()` does not. */
export class Background {
  readonly #scheduler: PeriodicScheduler;
  readonly #unlisten: () => void = () => undefined;

  constructor(host: BackgroundHost) {
    // Periods are real time; the dwell scanner's deadlines are on the engine's clock.
    this.#scheduler = new PeriodicScheduler({ clock: systemClock, onError: (e, job) => host.onError(coerceError(e), job.name) });
    if ([...host.workflows.values()].some((w) => w.options.dwell)) dwellJob(this.#scheduler, host);
    this.#scheduler.add({
      name: 'closing the approvals of ended tasks',
      periodMs: host.dwellScanMs,
      run: () => closeEndedApprovals(host.store, host.clock),
    });
    const purge = purgeJob(host);
    if (purge) this.#scheduler.add(purge.job('deleting expired idempotency records'));
    const retention = retentionJob(host);
    if (retention) this.#scheduler.add(retention.job('deleting finished tasks past their retention'));
    const frames = framesJob(host);
    if (frames) this.#scheduler.add(frames.job('deleting stream frames of ended tasks'));
    const blobs = blobsJob(host);
    if (blobs) this.#scheduler.add(blobs.job('deleting blobs no task holds'));
    this.#scheduler.add({ ...presenceJob(host.store, host.workerId, host.workflows), firstDelayMs: PRESENCE_REFRESH_MS });
    keyReleaseJob(this.#scheduler, host);
    const fire = host.fireSchedules;
    if (fire && host.scheduleScanMs > 0) {
      // A scan every scheduleScanMs (for schedules created or changed elsewhere), and one at the
      // next tick any schedule has, on the engine's clock.
      const job = this.#scheduler.add({
        name: 'firing schedule ticks',
        periodMs: host.scheduleScanMs,
        wakeClock: host.clock,
        run: async () => {
          const next = await fire(host.workflows);
          if (next !== null) job.wakeAt(next);
        },
      });
    }
    // A raised alert is the worker's news (its log, and the observers' onAlert).
    const raised = (alert: Alert): void => host.bus.publish({ type: 'alert:raised', workerId: host.workerId, run: null, payload: alert });
    if (host.alerts) this.#unlisten = alertsJob(this.#scheduler, { ...host, raised }, host.alerts);
    alertPurgeJob(this.#scheduler, host, host.alerts?.keepMs ?? DEFAULT_ALERT_KEEP_MS);
    // Deletions whose process died before reporting them reach this worker's observers.
    const deps = { store: host.store, clock: host.clock, observers: host.observers };
    if (host.retentionSweepMs > 0 && host.observers.some((o) => o.onTasksDeleted)) {
      this.#scheduler.add({
        name: 'reporting deletions of tasks',
        periodMs: host.retentionSweepMs,
        firstDelayMs: Math.min(host.retentionSweepMs, 60_000),
        run: () => reportPendingDeletions(deps),
      });
    }
  }

  async stop(): Promise<void> {
    this.#unlisten();
    await this.#scheduler.stop();
  }

  /** Clears every timer at once; what waits on the store is not waited for. */
  abandon(): void {
    this.#unlisten();
    this.#scheduler.stop().catch(() => undefined);
  }
}

/**
 * One dwell scanner per worker, for the workflows it serves that bound their dwell: a scan every
 * `dwellScanMs`, and one when the earliest bound the last scan saw passes.
 */
function dwellJob(scheduler: PeriodicScheduler, host: BackgroundHost): void {
  const scanner = new DwellScanner({
    store: host.store,
    clock: host.clock,
    workflows: () => host.workflows.values(),
    changed: (taskId) => host.bus.publish({ type: 'task:settled', taskId }),
    cancelled: (taskId, reason) => host.bus.publish({ type: 'task:cancel', taskId, reason }),
    alerted: (alert) => host.bus.publish({ type: 'dwell:alert', alert }),
  });
  const job = scheduler.add({
    name: 'scanning dwell timeouts',
    periodMs: host.dwellScanMs,
    wakeClock: host.clock,
    run: async () => {
      const next = await scanner.scan();
      if (next !== null) job.wakeAt(next);
    },
  });
}

/** Expired idempotency records are deleted by every worker (see sweeper.ts). */
function purgeJob(host: BackgroundHost): Sweeper | null {
  const idempotency = host.idempotency;
  if (!idempotency || host.purgeMs <= 0) return null;
  return new Sweeper({
    purge: (limit) => idempotency.purge(limit),
    intervalMs: host.purgeMs,
    onError: (e) => host.onError(coerceError(e), 'deleting expired idempotency records'),
  });
}

/** Finished tasks past their retention, of the workflows this worker serves (retention/). */
function retentionJob(host: BackgroundHost): Sweeper | null {
  const kept = [...host.workflows.values()].map((w) => ({
    name: w.name,
    ...(w.options.retention ? { retention: resolveRetention(w.options.retention, w.name) } : {}),
  }));
  const deletions = (now: number) => sweepDeletions(now, host.retention, kept);
  // No workflow here keeps any status for a limited time: there is nothing to sweep.
  if (host.retentionSweepMs <= 0 || !deletions(0).length) return null;
  const deps = { store: host.store, clock: host.clock, observers: host.observers };
  const by = { kind: 'worker' as const, id: host.workerId };
  return new Sweeper({
    purge: (limit) => sweepOnce(deps, deletions(host.clock.now()), limit, by),
    intervalMs: host.retentionSweepMs,
    stopsFor: () => false,
    onError: (e) => host.onError(coerceError(e), 'deleting finished tasks past their retention'),
  });
}

/** Stream frames of tasks that ended more than `framesAfterEndMs` ago (see stream-frames.ts). */
function framesJob(host: BackgroundHost): Sweeper | null {
  const afterEndMs = host.framesAfterEndMs;
  if (afterEndMs === null || host.retentionSweepMs <= 0) return null;
  return new Sweeper({
    purge: (limit) => host.store.purgeChunks(host.clock.now() - afterEndMs, limit),
    intervalMs: host.retentionSweepMs,
    onError: (e) => host.onError(coerceError(e), 'deleting stream frames of ended tasks'),
  });
}

/** Blobs of the payload store that no task holds any more (payloads/). */
function blobsJob(host: BackgroundHost): Sweeper | null {
  const layer = LAYERS.get(host.store);
  if (!layer || host.retentionSweepMs <= 0) return null;
  return new Sweeper({
    purge: (limit) => layer.collect(host.clock.now() - host.collectBlobsAfterMs, limit),
    intervalMs: host.retentionSweepMs,
    onError: (e) => host.onError(coerceError(e), 'deleting blobs no task holds'),
  });
}

/** The background jobs of a worker serving `workflows`, from its engine and its options. */
export function workerBackground(
  host: WorkerHost,
  o: ResolvedOptions,
  workerId: string,
  store: Store,
  workflows: ReadonlyMap<string, Workflow>,
  onError: (error: Error, during: string) => void,
): Background {
  return new Background({
    workerId,
    store,
    clock: host.clock,
    bus: host.bus,
    workflows,
    observers: host.observers ?? [],
    idempotency: host.idempotency,
    retention: host.retention ?? {},
    framesAfterEndMs: host.streamFrames?.keep === 'step' ? null : (host.streamFrames?.afterEndMs ?? DEFAULT_FRAMES_AFTER_END_MS),
    dwellScanMs: o.dwellScanMs,
    purgeMs: o.purgeMs,
    retentionSweepMs: o.retentionSweepMs,
    scheduleScanMs: o.scheduleScanMs,
    ...(host.fireSchedules ? { fireSchedules: host.fireSchedules } : {}),
    alerts: host.alerts ?? null,
    collectBlobsAfterMs: host.collectBlobsAfterMs ?? 3_600_000,
    // A job that met the store closed under it ran as the engine shut down: nothing went wrong.
    onError: (error, during) => {
      if (!(error instanceof ClosedError)) onError(error, during);
    },
  });
}
