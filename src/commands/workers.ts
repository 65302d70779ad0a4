/**
 * @module commands/workers
 * The workers an engine makes: each gets the engine's store, clock, workflows, news bus,
 * observers, idempotency records and retention, and leaves the engine's set when it stops.
 */
import type { ResolvedAlerts } from '../alerts/options.ts';
import type { Clock } from '../clock.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { NewsBus } from '../news.ts';
import type { Observer } from '../observers.ts';
import type { RetentionMs } from '../retention/policy.ts';
import type { Store } from '../store.ts';
import type { ResolvedStreamFrames } from '../stream-frames.ts';
import { Worker, type WorkerOptions } from '../worker.ts';
import type { Workflow } from '../workflow.ts';
import type { RateLimitTable } from '../rate-limits/config.ts';

export interface WorkerHost {
  open(): Promise<Store>;
  clock: Clock;
  workflows: ReadonlyMap<string, Workflow>;
  bus: NewsBus;
  observers: readonly Observer[];
  idempotency: Idempotency;
  outputBytes: number;
  retention: RetentionMs;
  streamFrames: ResolvedStreamFrames;
  /** Fires the due schedule ticks of the workflows `serves` accepts. */
  fireSchedules: (workflows: ReadonlyMap<string, Workflow>) => Promise<number | null>;
  /** The engine's live workers: the new one is added, and removed when it stops. */
  workers: Set<Worker>;
  /** The Engine, for `engineOf(ctx)` in workflow code. */
  engine: object;
  /** The engine's alerts, resolved (null: none). */
  alerts: ResolvedAlerts | null;
  /** The engine's named rate limits. */
  rateLimits: RateLimitTable;
  /** How long a blob no task holds is kept (payloads/). */
  collectBlobsAfterMs: number;
}

export function newWorker(host: WorkerHost, options: WorkerOptions): Worker {
  const w = new Worker(
    {
      store: () => host.open(),
      clock: host.clock,
      workflows: () => host.workflows,
      bus: host.bus,
      observers: host.observers,
      idempotency: host.idempotency,
      outputBytes: host.outputBytes,
      retention: host.retention,
      streamFrames: host.streamFrames,
      fireSchedules: host.fireSchedules,
      engine: host.engine,
      rateLimits: host.rateLimits,
      alerts: host.alerts,
      collectBlobsAfterMs: host.collectBlobsAfterMs,
      onStopped: (worker) => host.workers.delete(worker as Worker),
    },
    options,
  );
  host.workers.add(w);
  return w;
}
