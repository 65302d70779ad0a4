/**
 * @module commands/engine-options
 * The options of `new Engine()`.
 */
import { optionNames } from '../option-keys.ts';
import type { AlertOptions } from '../alerts/types.ts';
import type { Clock } from '../clock.ts';
import type { Limits } from '../limits.ts';
import type { Observer } from '../observers.ts';
import type { Store } from '../store.ts';
import type { StoreOptions } from '../store-url.ts';
import type { Workflow } from '../workflow.ts';
import type { RetentionPolicy } from '../retention/policy.ts';
import type { IdempotencyBackend } from '../idempotency/records.ts';
import type { StreamFramesOptions } from '../stream-frames.ts';
import type { RateLimits } from '../api/rate-limits.ts';
import type { PayloadOptions } from '../payloads/options.ts';
import type { PayloadCodec } from '../payloads/codec.ts';

/** Every option of `new Engine()`; a key not listed is refused. */
export const ENGINE_OPTIONS = optionNames<EngineOptions>()(
  'store',
  'workflows',
  'clock',
  'observers',
  'limits',
  'idempotency',
  'retention',
  'streamFrames',
  'rateLimits',
  'alerts',
  'payloads',
  'codec',
  'sqlite',
  'postgres',
);

export interface EngineOptions extends StoreOptions {
  /**
   * Where tasks live: `sqlite:<path>`, `postgres://…`, or a Store instance.
   * @defaultValue 'sqlite:./.stepwise/stepwise.db'
   */
  store?: string | Store;
  /** Workflows this engine can start and its workers can run. */
  workflows?: readonly Workflow<any, any>[]; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Source of "now" and of timers. @defaultValue the system clock */
  clock?: Clock;
  /**
   * What watches the work (logs, metrics, traces, live views): hooks around every run and step
   * attempt of this engine's workers, and every log entry this process appends. See {@link Observer}.
   */
  observers?: readonly Observer[];
  /** Size limits on inputs, outputs and signal payloads (defaults: 16 MiB, 16 MiB, 1 MiB). */
  limits?: Limits;
  /**
   * Where `engine.idempotency` keeps its records: the engine's own database (the default), or
   * another backend such as `new RedisIdempotency({ url })` for hot, short-lived keys (closed by
   * whoever made it). Steps with a business key always use the engine's database.
   */
  idempotency?: IdempotencyBackend;
  /**
   * How long finished tasks are kept, per final status (a workflow's own `retention` overrides it
   * per status). The engine's workers delete older ones, each with its journal, log, signals and
   * approvals, every `retentionSweepMs` (see WorkerOptions), for the workflows they serve. Left out
   * or `null`: kept until deleted (`engine.delete`, `engine.purge`). Keep tasks at least as long as
   * anyone may ask for their result: a deleted task is TASK_NOT_FOUND, and its idempotency key
   * starts a new task.
   * @example { succeeded: '7d', cancelled: '7d', failed: '30d' }
   * @defaultValue every task is kept
   */
  retention?: RetentionPolicy;
  /**
   * How long the live frames of streaming model steps are kept for readers (`engine.events({ streams })`,
   * `GET /api/tasks/:id/stream`): until the task ends by default, so a page reloaded just after a
   * step finished still replays its tokens. See {@link StreamFramesOptions}.
   */
  streamFrames?: StreamFramesOptions;
  /**
   * Named rate limits shared by every worker on this store, in requests and tokens per window:
   * a step draws on one with `ctx.step(name, fn, { rateLimit: 'openai' })` (or `{ name, key,
   * tokens }`: its own window per key), and the model helpers of `stepwise-engine/ai` draw the
   * call's expected tokens and settle its real usage. A step whose window is full parks until
   * capacity returns. Every process that runs such steps must declare the same limits.
   * See docs/rate-limits.md.
   * @example { openai: { requests: 500, tokens: 200_000, per: '1m' } }
   * @defaultValue no limits
   */
  rateLimits?: RateLimits;
  /**
   * What this engine's workers alert operators about — a workflow failing again and again, a task
   * in a crash loop, a workflow with due tasks and no live worker, a task stuck past its dwell
   * bound — through observers' `onAlert` and an optional webhook, once per subject and quiet
   * period across every worker of the store. See docs/operations.md. `{}`: the defaults.
   * @defaultValue no alerts
   */
  alerts?: AlertOptions;
  /**
   * The payload store: values whose JSON is at least `threshold` characters (4096 by default) are
   * stored once per distinct content, compressed, and a list that grows (an agent's transcript)
   * by what is new, in the database or a blob backend. `false`: every value in its row, as
   * before. See docs/payloads.md.
   * @defaultValue on, in the database
   */
  payloads?: PayloadOptions | false;
  /**
   * Encrypts every payload the engine stores (inputs, outputs, errors, signal and approval
   * payloads, schedule inputs, stream frames), for example `aesGcmCodec({ keys, current })`.
   * Every process of the store needs the same keys. See docs/payloads.md.
   * @defaultValue none
   */
  codec?: PayloadCodec;
}
