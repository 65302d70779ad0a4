/**
 * @module worker/host
 * What a worker needs from its engine.
 */
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import type { NewsBus } from '../news.ts';
import type { Observer } from '../observers.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { ResolvedAlerts } from '../alerts/options.ts';
import type { RateLimitTable } from '../rate-limits/config.ts';
import type { RetentionMs } from '../retention/policy.ts';
import type { ResolvedStreamFrames } from '../stream-frames.ts';

/** @internal What a worker needs from its engine. */
export interface WorkerHost {
  store: () => Promise<Store>;
  clock: Clock;
  workflows: () => ReadonlyMap<string, Workflow>;
  bus: NewsBus;
  /** For the retention sweep's `onTasksDeleted` (the other hooks are fed from the bus). */
  observers?: readonly Observer[];
  /** Idempotency records for steps with a business key (kept in the store). */
  idempotency?: Idempotency;
  /** The largest step or task output, in bytes of JSON. @defaultValue DEFAULT_LIMITS.outputBytes */
  outputBytes?: number;
  /** The engine's retention of finished tasks (workflows may override it). @defaultValue keep all */
  retention?: RetentionMs;
  /** How long stream frames are kept. @defaultValue until the task ends, and 10 minutes after */
  streamFrames?: ResolvedStreamFrames;
  /** Fires the due ticks of the schedules of the workflows `serves` accepts (engine.schedules). */
  fireSchedules?: (workflows: ReadonlyMap<string, Workflow>) => Promise<number | null>;
  /** Called with the worker once it has stopped. */
  onStopped: (worker: object) => void;
  /** The Engine this worker belongs to (workflow code reaches it through `engineOf(ctx)`). */
  engine?: object;
  /** The engine's named rate limits (steps draw on them). */
  rateLimits?: RateLimitTable;
  /** How long a blob no task holds is kept before this worker deletes it (payloads/). @defaultValue 1 hour */
  collectBlobsAfterMs?: number;
  /** The engine's alerts (`new Engine({ alerts })`), resolved; null or absent: none. */
  alerts?: ResolvedAlerts | null;
}
