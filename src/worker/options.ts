/**
 * @module worker/options
 * Internal: not part of the public API (the package exports only its index modules).
 * A worker's options, documented and checked once: `resolveOptions` turns what the user passed
 * into the numbers the worker runs on, or throws an InvalidArgumentError that names the option.
 */
import { InvalidArgumentError } from '../errors.ts';
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import { DEFAULT_SWEEP_MS, MAX_SWEEP_MS } from '../sweeper.ts';

export interface WorkerOptions {
  /** Tasks run at once by this worker. @defaultValue 8 */
  concurrency?: number;
  /**
   * Most tasks taken by one claim; a claim never takes more than the free slots, so a worker does
   * not hold tasks it cannot start. Filling every free slot at once keeps claims few when many
   * workers share a queue (smaller claims made each worker claim several times in a row, each
   * claimer skipping the rows the others had locked).
   * @defaultValue 256
   */
  claimBatch?: number;
  /** Serve only these workflows (names). @defaultValue every workflow registered with the engine */
  workflows?: readonly string[];
  /** A stable name for this worker in leases and history. @defaultValue `<hostname>-<pid>-<random>` */
  workerId?: string;
  /**
   * Lease length. A task whose worker stops heartbeating is resumed by another worker this long
   * after its last heartbeat. @defaultValue 30000
   */
  leaseMs?: number;
  /**
   * Heartbeat period: renews leases and picks up cancel/pause requests. At most a third of the
   * lease: a run that has not renewed its lease for `leaseMs − 2 × heartbeatMs` stops itself.
   * @defaultValue min(2000, leaseMs / 3)
   */
  heartbeatMs?: number;
  /**
   * How often an idle worker looks for due tasks. Tasks started, resumed or signalled through an
   * engine in the same process (or, on PostgreSQL, anywhere) wake it at once. @defaultValue 500
   */
  pollIntervalMs?: number;
  /** `stop()` lets in-flight steps finish for this long before firing their signals. @defaultValue 10000 */
  shutdownGraceMs?: number;
  /** After a run's signal fires, how long it may take to settle before it is abandoned. @defaultValue 5000 */
  cancelGraceMs?: number;
  /** Waits (retry backoff, sleep) longer than this park the task instead of holding a slot. @defaultValue 5000 */
  parkAfterMs?: number;
  /**
   * How often the worker's dwell scanner looks for tasks past their workflow's `dwell` bounds, and
   * its closer for open approvals of ended tasks. @defaultValue 1000
   */
  dwellScanMs?: number;
  /**
   * How often the worker deletes idempotency records whose time to live has passed (they already
   * count as absent; this keeps the table from growing). `0` turns it off. @defaultValue 600000
   */
  idempotencyPurgeMs?: number;
  /**
   * How often the worker deletes the finished tasks of its workflows that are past their retention
   * (`EngineOptions.retention`, a workflow's `retention`); without a retention, it deletes none.
   * `0` turns it off. @defaultValue 600000
   */
  retentionSweepMs?: number;
  /**
   * How often the worker fires the schedule ticks that are due (`engine.schedules`), for the
   * workflows it serves. `0` turns it off. @defaultValue 1000
   */
  scheduleScanMs?: number;
  /**
   * How many parked runs the worker keeps in memory. A task that parks (it waits for a signal, a
   * sleep, a child) and is claimed next by the same worker takes up its code where it stopped,
   * without reading its journal or replaying it: a chat's turn costs the same at turn 300 as at
   * turn 3. Elsewhere, or once dropped, the task is replayed as usual. `0` turns it off.
   * @defaultValue 256
   */
  keepParked?: number;
  /** How long a parked run is kept in memory (see {@link keepParked}). @defaultValue 300000 */
  keepParkedMs?: number;
  /** @internal For tests: how long a replay waits for the call its journal says comes next. @defaultValue 30000 */
  replayStallMs?: number;
}

const positive = (name: string, v: number): number => {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new InvalidArgumentError(`worker option ${name} must be a positive number, got ${String(v)}`);
  return v;
};
/** The interval of a sweep: 0 (off) or milliseconds a timer can wait. */
const sweepMs = (name: string, v: number | undefined): number => {
  if (v === undefined) return DEFAULT_SWEEP_MS;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_SWEEP_MS) {
    throw new InvalidArgumentError(`${name} must be a number of milliseconds from 1 to ${MAX_SWEEP_MS} (about 24.8 days), or 0 to turn it off; got ${String(v)}.`);
  }
  return v;
};
/** Counts (tasks, claims): a fraction would be floored to a worker that never claims. */
const positiveInt = (name: string, v: number): number => {
  if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError(`worker option ${name} must be a whole number ≥ 1, got ${String(v)}`);
  return v;
};

/** Counts that may be 0 (off). */
const count = (name: string, v: number): number => {
  if (!Number.isInteger(v) || v < 0) throw new InvalidArgumentError(`worker option ${name} must be a whole number ≥ 0 (0 turns it off), got ${String(v)}`);
  return v;
};

/** A worker's options, checked, with their defaults. */
export interface ResolvedOptions {
  concurrency: number;
  claimBatch: number;
  only: readonly string[] | undefined;
  leaseMs: number;
  heartbeatMs: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  cancelGraceMs: number;
  replayStallMs: number | undefined;
  parkAfterMs: number;
  dwellScanMs: number;
  purgeMs: number;
  retentionSweepMs: number;
  scheduleScanMs: number;
  keepParked: number;
  keepParkedMs: number;
}

/** Every option of `engine.worker()`; a key not listed is refused. */
export const WORKER_OPTIONS = optionNames<WorkerOptions>()(
  'concurrency',
  'claimBatch',
  'workflows',
  'workerId',
  'leaseMs',
  'heartbeatMs',
  'pollIntervalMs',
  'shutdownGraceMs',
  'cancelGraceMs',
  'parkAfterMs',
  'dwellScanMs',
  'idempotencyPurgeMs',
  'retentionSweepMs',
  'scheduleScanMs',
  'replayStallMs',
  'keepParked',
  'keepParkedMs',
);

export function resolveOptions(options: WorkerOptions): ResolvedOptions {
  checkOptionKeys(options, WORKER_OPTIONS, 'engine.worker()');
  const leaseMs = positive('leaseMs', options.leaseMs ?? 30_000);
  const heartbeatMs = positive('heartbeatMs', options.heartbeatMs ?? Math.min(2000, leaseMs / 3));
  if (heartbeatMs * 3 > leaseMs) {
    throw new InvalidArgumentError(`heartbeatMs (${heartbeatMs}) must be at most a third of leaseMs (${leaseMs}): a run stops itself two heartbeats before its lease could expire.`);
  }
  return {
    concurrency: positiveInt('concurrency', options.concurrency ?? 8),
    claimBatch: positiveInt('claimBatch', options.claimBatch ?? 256),
    only: options.workflows,
    leaseMs,
    heartbeatMs,
    pollIntervalMs: positive('pollIntervalMs', options.pollIntervalMs ?? 500),
    shutdownGraceMs: options.shutdownGraceMs ?? 10_000,
    cancelGraceMs: options.cancelGraceMs ?? 5000,
    replayStallMs: options.replayStallMs,
    parkAfterMs: options.parkAfterMs ?? 5000,
    dwellScanMs: positive('dwellScanMs', options.dwellScanMs ?? 1000),
    purgeMs: sweepMs('idempotencyPurgeMs', options.idempotencyPurgeMs),
    retentionSweepMs: sweepMs('retentionSweepMs', options.retentionSweepMs),
    scheduleScanMs: options.scheduleScanMs === undefined ? 1000 : sweepMs('scheduleScanMs', options.scheduleScanMs),
    keepParked: options.keepParked === undefined ? 256 : count('keepParked', options.keepParked),
    keepParkedMs: positive('keepParkedMs', options.keepParkedMs ?? 300_000),
  };
}
