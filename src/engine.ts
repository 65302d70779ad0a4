/**
 * @module engine
 * The Engine: commands on tasks (start, get, list, result, cancel, retry, pause, resume, signal,
 * explain, delete, purge) and the factory of workers. Every status change goes through `planTransition` (the
 * lifecycle table) and one guarded store write; a command that loses a race re-reads and
 * re-plans, so two users cancelling and pausing at once each get a correct answer or a clear
 * IllegalTransitionError.
 */
import { systemClock, type Clock } from './clock.ts';
import { toMs, type Duration } from './duration.ts';
import {
  ClosedError, ConcurrentUpdateError, ConflictError, ERROR_CODES, IllegalTransitionError, InvalidArgumentError,
  InvalidInputError, TaskCancelledError, TaskFailedError, TaskNotFoundError, TimeoutError,
  coerceError, isStepwiseError,
} from './errors.ts';
import { ALL_STATUSES, isFinished, isTaskStatus, userEvents, type LifecycleEvent, type TaskStatus } from './lifecycle.ts';
import { LocalBus } from './local-bus.ts';
import { probeStore } from './commands/probe.ts';
import { decodeError, decodeJson, deserializeError, encodeJson, type SerializedError } from './serialize.ts';
import type { SignalRow, StepRow, Store, TaskPatch, TaskRow, WakeEvent } from './store.ts';
import { DEFAULT_STORE_URL, openStore, type StoreOptions } from './store-url.ts';
import { toStepInfo, toSummary, type TaskInfo, type TaskSummary } from './task-info.ts';
import { toTaskEvent, type Actor, type TaskEvent } from './task-events.ts';
import { LogTail, allEvents, checkStreamOptions, taskEvents, type EventsOptions } from './event-stream.ts';
import type { StreamEvent } from './stream-frames.ts';
import { notify, type Observer } from './observers.ts';
import { planTransition, wakeFor } from './transitions.ts';
import { checkText } from './text-rules.ts';
import { checkSize, resolveLimits, type Limits } from './limits.ts';
import { Worker, type WorkerOptions } from './worker.ts';
import { shortId } from './ids.ts';
import { jsonEqual } from './json-equal.ts';
import { ResultWaiters } from './result-waiters.ts';
import { StartBatcher, type Inserted } from './start-batcher.ts';
import { batchWakeOfRows, planStart, startResult, type PlannedStart, type StartContext, type StartManyItem } from './start-plan.ts';
import { retryDeadline, taskDeadline } from './failure/deadline.ts';
import { calledAfterReceiving, consequencesOf, forgetUndone, planRetryFrom, undoneSteps } from './failure/retry-from.ts';
import { countRedo } from './failure/redo.ts';
import { isCleanupSeq } from './run/cleanup-scope.ts';
import { isWorkflow, type Workflow } from './workflow.ts';
import type { Budget } from './ai/usage.ts';
import { resolveRetention, type RetentionMs, type RetentionPolicy } from './retention/policy.ts';
import { MACHINE_SIGNAL_PREFIX, machineOf } from './machine/machine.ts';
import { machineInfo, type MachineInfo } from './machine/read.ts';
import { sendEvent, type SendResult } from './machine/send.ts';
import { checkKey } from './idempotency/keys.ts';
import { deleteTask, purgeTasks, type PurgeOptions, type PurgeResult } from './retention/purge.ts';
import { Idempotency } from './idempotency/run.ts';
import { EFFECT_DECISIONS, type EffectDecision } from './idempotency/at-most-once.ts';
import { effectApprovalOf } from './idempotency/effect-approval.ts';
import type { IdempotencyBackend } from './idempotency/records.ts';
import { decide as decideApproval, listApprovals } from './approvals/decide.ts';
import { RESERVED_SIGNAL_PREFIX } from './approvals/policy.ts';
import { toApprovalInfo } from './approvals/info.ts';
import type { ApprovalInfo, ApprovalsQuery, DecideOptions } from './approvals/types.ts';

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
}

export interface SignalOptions extends CommandOptions {
  /** Sending the same signal again with the same key records it once and returns the first answer. */
  idempotencyKey?: string;
  /**
   * Refuse the signal (CONFLICT, naming what the task waits for) unless the task is parked waiting
   * for an event of this name, or running (its code may be waiting for it right now). Catches a
   * typo such as "aprove" instead of queueing a signal nothing will ever receive.
   */
  requireWaiting?: boolean;
}

export interface SignalResult {
  /** `false` when the key was used before: nothing new was recorded. */
  created: boolean;
  /**
   * `waiting`: the task was parked waiting for it, and is now due; `queued`: kept until a wait for
   * its name receives it (a running task's code may be waiting for it now); `consumed`: (a repeat)
   * the first send was already received.
   */
  delivered: 'waiting' | 'queued' | 'consumed';
}

/** Who asks: a name (taken as a user) or an {@link Actor}. Recorded in the task's event log. */
export type By = string | Actor;

/** Options of commands on a task. */
export interface CommandOptions {
  /** Who asks (recorded in the log). @defaultValue an anonymous user */
  by?: By;
}

export interface StartOptions extends CommandOptions {
  /** Starting twice with the same key returns the first task instead of creating a second. */
  idempotencyKey?: string;
  /** Do not run before this much time has passed. */
  delay?: Duration;
  /** This task's spending limit over its model calls, instead of the workflow's `budget`. */
  budget?: Budget;
  /**
   * When the task must be finished (a Date or ms since the epoch): a run past it fails the task
   * with DEADLINE_EXCEEDED, firing the running step's signal. With a workflow `timeout` too, the
   * earlier of the two applies.
   */
  deadline?: Date | number;
}

export interface RetryTaskOptions extends CommandOptions {
  /** Run again from this step (a step id: `name`, or `name#2` for its second call), forgetting it and every later call. */
  fromStep?: string;
  /** A new deadline for the retried task (a Date or ms since the epoch). */
  deadline?: Date | number;
}

export interface StartResult {
  id: string;
  workflow: string;
  status: TaskStatus;
  /** `false` when the idempotency key matched an existing task, which is returned instead. */
  created: boolean;
}

/**
 * A started task: what `start()` reports, and `result()` typed by the workflow's output when the
 * task was started from its definition (`engine.start(definition, input)`).
 */
export class TaskHandle<O = unknown> implements StartResult {
  readonly id: string;
  readonly workflow: string;
  readonly status: TaskStatus;
  readonly created: boolean;
  readonly #engine: Engine;
  /** @internal */
  constructor(engine: Engine, r: StartResult) {
    this.#engine = engine;
    this.id = r.id;
    this.workflow = r.workflow;
    this.status = r.status;
    this.created = r.created;
  }
  /** Waits for the task to finish: see {@link Engine.result}. */
  result(options?: ResultOptions): Promise<O> {
    return this.#engine.result<O>(this.id, options);
  }
  toJSON(): StartResult {
    return { id: this.id, workflow: this.workflow, status: this.status, created: this.created };
  }
}

export interface ListOptions {
  status?: TaskStatus | readonly TaskStatus[];
  workflow?: string;
  /** Page size, 1–1000. @defaultValue 50 */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface CountOptions {
  /** Only these statuses. @defaultValue every status */
  status?: TaskStatus | readonly TaskStatus[];
  /** Only tasks of these workflows. */
  workflow?: string | readonly string[];
  /** Only tasks due now (their `runAt` has come): pending or waiting tasks a worker may claim. */
  due?: boolean;
  /**
   * Count each status up to this many only: the work stays bounded however many tasks there are
   * (metrics scraped every few seconds use it). @defaultValue no cap: exact counts
   */
  cap?: number;
}

export interface ListResult {
  tasks: TaskSummary[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  nextCursor: string | null;
}

export interface ResultOptions {
  /** Reject with TimeoutError if the task has not finished by then. */
  timeout?: Duration;
  signal?: AbortSignal;
}

export interface Explanation {
  id: string;
  status: TaskStatus;
  /** One sentence on why the task is (not) moving. */
  summary: string;
  /** What a person may do now (cancel, pause, resume, retry). */
  legalEvents: LifecycleEvent[];
  lease: { owner: string; expiresAt: number; expired: boolean } | null;
  wait: Record<string, unknown> | null;
  runAt: number | null;
  lastStep: { name: string; status: string; attempts: number; error: string | null } | null;
  error: string | null;
  /** A state machine's task: the state it is in and the events it takes now (`engine.send`). */
  machine?: { state: string; legalEvents: string[] };
}

/** The actor of a command: `by` checked, an anonymous user without it. */
function actorOf(by: By | undefined): Actor {
  if (by === undefined) return { kind: 'user', id: 'anonymous' };
  const actor: Actor = typeof by === 'string' ? { kind: 'user', id: by } : by;
  if (
    typeof actor !== 'object' || actor === null || !['user', 'worker', 'system'].includes(actor.kind) ||
    typeof actor.id !== 'string' || !actor.id || actor.id.length > 200
  ) {
    throw new InvalidArgumentError('`by` must be a name of 1-200 characters or { kind: "user" | "worker" | "system", id }.');
  }
  checkText(actor.id, 'The actor (`by`)');
  return { kind: actor.kind, id: actor.id };
}

export class Engine {
  readonly clock: Clock;
  readonly #workflows = new Map<string, Workflow>();
  readonly #bus = new LocalBus();
  /** This engine in the announcements of its starts, which it delivers to its own workers itself. */
  readonly #origin = shortId();
  /** The `result()` calls waiting, by task: one listener for all of them. */
  readonly #waiters: ResultWaiters;
  readonly #workers = new Set<Worker>();
  readonly #storeOption: string | Store;
  readonly #storeOptions: StoreOptions;
  #ready: Promise<Store> | null = null;
  #starts: StartBatcher | null = null;
  #closed = false;
  #unsubscribe: (() => Promise<void>) | null = null;
  /**
   * The subscription to finished tasks, opened by the first `result()` (a process that never waits
   * for a result, such as a worker, is not sent one message per finished task); null until then,
   * and again after a failed attempt, so that the next `result()` tries again.
   */
  #settled: Promise<(() => Promise<void>) | null> | null = null;
  /** Whether that subscription is open (then `result()` does not wait for it). */
  #settledLive = false;
  readonly #observers: readonly Observer[];
  /** @internal The size limits in force (workers check outputs against them). */
  readonly limits: Required<Limits>;
  /** Delivers this process's log entries to observers' `onEvent` (only when one has it). */
  #tail: LogTail | null = null;
  #offTail: (() => void) | null = null;
  /**
   * Idempotency records: `run(key, fn, { ttl, whileRunning, fingerprint })` runs `fn` once per key
   * across processes and tasks and returns the stored result to repeats (see README, "Exactly-once
   * effects").
   */
  readonly idempotency: Idempotency;
  readonly #retention: RetentionMs;

  /**
   * @example
   * const engine = new Engine({ store: 'sqlite:./stepwise.db', workflows: [publish] });
   */
  constructor(options: EngineOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.#waiters = new ResultWaiters(this.#bus, this.clock);
    this.#storeOption = options.store ?? DEFAULT_STORE_URL;
    this.#storeOptions = { ...(options.sqlite ? { sqlite: options.sqlite } : {}), ...(options.postgres ? { postgres: options.postgres } : {}) };
    this.limits = resolveLimits(options.limits, (name, v) => {
      if (!Number.isSafeInteger(v) || (v as number) < 1) throw new InvalidArgumentError(`Engine option ${name} must be a whole number of bytes ≥ 1, got ${String(v)}.`);
    });
    this.#retention = options.retention === undefined ? {} : resolveRetention(options.retention, 'new Engine()');
    this.#observers = [...(options.observers ?? [])];
    for (const o of this.#observers) {
      if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('Each observer must be an object with hooks (onRunStart, onStepEnd, onEvent, …).');
    }
    for (const wf of options.workflows ?? []) this.register(wf);
    const backend = options.idempotency;
    this.idempotency = new Idempotency(async () => {
      if (backend) return backend;
      const store = await this.#open();
      if (!store.idempotencyRecords) throw new InvalidArgumentError(`The store ${store.description} keeps no idempotency records: pass EngineOptions.idempotency.`);
      return store.idempotencyRecords();
    }, {
      clock: this.clock,
      observers: this.#observers,
      appendLog: async (taskId, at, entries) => {
        const store = await this.#open();
        if (store.appendTaskEvents && (await store.appendTaskEvents(taskId, at, entries))) this.#appended(taskId);
      },
    });
  }

  /** Adds a workflow definition. A second definition with the same name replaces the first. */
  register(wf: Workflow<any, any>): this { // eslint-disable-line @typescript-eslint/no-explicit-any
    if (!isWorkflow(wf)) throw new InvalidArgumentError('engine.register() takes a value created by workflow(name, fn).');
    this.#workflows.set(wf.name, wf as Workflow);
    return this;
  }

  /** The registered workflow definitions, by name. */
  get workflows(): ReadonlyMap<string, Workflow> {
    return this.#workflows;
  }

  /**
   * Opens the store and applies migrations (done on first use; call it to fail fast). Once open,
   * each call asks the store again (one trivial read with a deadline of two seconds): a closed
   * engine rejects with CLOSED, a store that does not answer with STORE_UNAVAILABLE (health checks
   * rely on it).
   */
  async ready(): Promise<Store> {
    const opened = this.#ready !== null;
    const store = await this.#open();
    if (opened) await probeStore(store);
    return store;
  }

  /** The open store (opened and migrated once), for the engine's own commands: no probe. */
  #open(): Promise<Store> {
    if (this.#closed) return Promise.reject(new ClosedError('The engine'));
    this.#ready ??= (async () => {
      const owned = typeof this.#storeOption === 'string';
      const store = owned ? await openStore(this.#storeOption as string, this.#storeOptions) : (this.#storeOption as Store);
      try {
        await store.migrate();
        if (store.subscribe) {
          this.#unsubscribe = await store.subscribe((e) => {
            // Its own starts were delivered to its workers when they were written.
            if (e.origin !== this.#origin) this.#deliver(e);
          }, 'work');
        }
        if (this.#observers.some((o) => typeof o.onEvent === 'function')) {
          const tail = new LogTail(store, (e) => notify(this.#observers, 'onEvent', e));
          this.#tail = tail;
          this.#offTail = this.#bus.on('log:appended', ({ taskId }) => tail.nudge(taskId));
        }
      } catch (e) {
        // Not cached: the next call tries again (the database may be back by then).
        this.#ready = null;
        if (owned) await store.close().catch(() => undefined);
        throw e;
      }
      return store;
    })();
    return this.#ready;
  }

  /**
   * Creates a task. With an idempotency key, a second call returns the first task (`created:
   * false`); the same key with another workflow or input is an IdempotencyConflictError.
   * @example
   * const { id } = await engine.start('publish-article', { topic: 'x' }, { idempotencyKey: 'article-8001' });
   */
  start<I, O, In>(workflow: Workflow<I, O, In>, ...args: undefined extends In ? [input?: In, options?: StartOptions] : [input: In, options?: StartOptions]): Promise<TaskHandle<O>>;
  start(workflow: string, input?: unknown, options?: StartOptions): Promise<TaskHandle>;
  async start(workflow: string | Workflow<unknown, unknown, unknown>, input?: unknown, options: StartOptions = {}): Promise<TaskHandle> {
    const store = await this.#open();
    const planned = await planStart(this.#startContext(store), workflow, input, options);
    // Concurrent starts of this process share one statement and one commit (start-batcher.ts).
    const inserted = await this.#startBatcher(store).insert(planned.task);
    return new TaskHandle(this, startResult(planned, inserted));
  }

  /**
   * Starts many tasks in one round trip: one statement and one commit for up to 10,000 tasks
   * (a longer list is written 10,000 at a time, each part committed on its own). Every item is
   * checked before anything is written: a bad one rejects the call, naming its index. Results are
   * in the order of `items`; an item whose idempotency key names an existing task (or an earlier
   * item's) gets that task with `created: false`, and one whose key names a task of another
   * workflow or input rejects the call with IdempotencyConflictError (the other items are
   * started: call again with the list corrected to get them).
   * @example
   * const handles = await engine.startMany(docs.map((d) => ({ workflow: 'summarise', input: d, idempotencyKey: d.id })));
   */
  async startMany(items: readonly StartManyItem[]): Promise<TaskHandle[]> {
    const store = await this.#open();
    if (!Array.isArray(items)) throw new InvalidArgumentError('engine.startMany() takes an array of { workflow, input, idempotencyKey?, delay? }.');
    const context = this.#startContext(store);
    const planned: PlannedStart[] = [];
    for (const [i, item] of items.entries()) {
      if (typeof item !== 'object' || item === null) throw new InvalidArgumentError(`startMany(): item ${i} must be an object { workflow, input, idempotencyKey?, delay? }.`);
      try {
        planned.push(await planStart(context, item.workflow, item.input, item));
      } catch (e) {
        if (e instanceof Error) e.message = `startMany(): item ${i}: ${e.message}`;
        throw e;
      }
    }
    const inserted = await this.#startBatcher(store).insertMany(planned.map((p) => p.task));
    return planned.map((p, i) => new TaskHandle(this, startResult(p, inserted[i] as Inserted)));
  }

  #startContext(store: Store): StartContext {
    return { store, clock: this.clock, limits: this.limits, workflows: this.#workflows, actorOf };
  }

  #startBatcher(store: Store): StartBatcher {
    return (this.#starts ??= new StartBatcher(store, {
      origin: this.#origin,
      onCreated: (tasks) => {
        // Their end will be heard of here if this process listens for ends, or (a store without
        // a channel) if its own workers run them.
        if (this.#settledLive || (!store.subscribe && this.#workers.size)) this.#waiters.created(tasks.map((t) => t.id));
        // One wake-up for the batch: this process's workers look for work once.
        const wake = batchWakeOfRows(tasks);
        if (wake) this.#deliver(wake);
        for (const t of tasks) this.#appended(t.id);
      },
    }));
  }

  /** The task with its steps (journal) and history (event log); `{ steps: false, history: false }` reads only the task row. */
  async get(id: string, options: { steps?: boolean; history?: boolean } = {}): Promise<TaskInfo> {
    const store = await this.#open();
    const row = await this.#row(store, id);
    // A poller that needs only the status and progress skips the journal and the log (`steps: false`).
    const [steps, history, approvals] = await Promise.all([
      options.steps === false ? [] : store.getSteps(id),
      options.history === false ? [] : store.getEvents(id),
      options.steps === false ? [] : store.listApprovals({ taskId: id, limit: 1000 }),
    ]);
    const machine = machineInfo(row, steps);
    return {
      ...toSummary(row), steps: steps.map((s) => toStepInfo(s, row.redo)), history: history.map(toTaskEvent), approvals: approvals.map(toApprovalInfo),
      ...(machine ? { machine } : {}),
    };
  }

  /**
   * Decides an at-most-once step whose task waits because `verify` could not tell whether its
   * effect happened (it waits on the approval `effect:<step>`): `rerun` calls the step again,
   * `skip` takes `result` as its result without calling it, `fail` fails the step. A shorthand for
   * `engine.decide` on that approval (data `{ action, result }`), so a decision sent twice with the
   * same `idempotencyKey` counts once. `by` defaults to `operator`.
   * @example
   * await engine.decideEffect(taskId, 'send-sms', 'skip', { result: { sent: true }, by: 'ops' });
   */
  async decideEffect(taskId: string, step: string, decision: EffectDecision, options: SignalOptions & { result?: unknown } = {}): Promise<ApprovalInfo> {
    if (!EFFECT_DECISIONS.includes(decision)) throw new InvalidArgumentError(`decision must be one of ${EFFECT_DECISIONS.join(', ')}, got ${JSON.stringify(decision)}.`);
    if (typeof step !== 'string' || !step) throw new InvalidArgumentError('decideEffect needs the step id (its name, with #n from its second occurrence on).');
    const approvalId = await effectApprovalOf(await this.approvals({ taskId, limit: 1000 }), taskId, step);
    const by = options.by === undefined ? 'operator' : typeof options.by === 'string' ? options.by : options.by.id;
    return this.decide(approvalId, {
      approve: true, by, data: { action: decision, ...(decision === 'skip' ? { result: options.result ?? null } : {}) },
      ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
    });
  }

  /** Tasks, newest first, optionally by status and workflow, a page at a time. */
  async list(options: ListOptions = {}): Promise<ListResult> {
    const store = await this.#open();
    const statuses = options.status === undefined ? undefined : Array.isArray(options.status) ? options.status : [options.status];
    for (const s of statuses ?? []) {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown status "${String(s)}": use one of ${ALL_STATUSES.join(', ')}.`);
    }
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`limit must be an integer from 1 to 1000, got ${limit}.`);
    const rows = await store.listTasks({
      limit,
      ...(statuses ? { statuses } : {}),
      ...(options.workflow !== undefined ? { workflow: options.workflow } : {}),
      ...(options.cursor !== undefined ? { before: options.cursor } : {}),
    });
    return { tasks: rows.map(toSummary), nextCursor: rows.length === limit ? (rows[rows.length - 1] as TaskRow).id : null };
  }

  /**
   * How many tasks there are now, by status (every status asked for is in the answer, 0 if none),
   * of some workflows, due now, or up to a cap per status.
   * @example
   * const { pending, waiting } = await engine.count({ status: ['pending', 'waiting'], workflow: 'publish-article' });
   */
  async count(options: CountOptions = {}): Promise<Record<TaskStatus, number>> {
    const store = await this.#open();
    const statuses: readonly TaskStatus[] = options.status === undefined ? ALL_STATUSES : Array.isArray(options.status) ? (options.status as readonly TaskStatus[]) : [options.status as TaskStatus];
    for (const s of statuses) {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown status "${String(s)}": use one of ${ALL_STATUSES.join(', ')}.`);
    }
    const workflows: readonly string[] | undefined = options.workflow === undefined ? undefined : Array.isArray(options.workflow) ? (options.workflow as readonly string[]) : [options.workflow as string];
    if (workflows?.some((w) => typeof w !== 'string' || !w)) throw new InvalidArgumentError('count({ workflow }): a workflow name, or a list of them.');
    const cap = options.cap;
    if (cap !== undefined && (!Number.isSafeInteger(cap) || cap < 1)) throw new InvalidArgumentError(`count({ cap }) must be a whole number ≥ 1, got ${String(cap)}.`);
    const counts = await store.countTasks({ statuses, ...(workflows ? { workflows } : {}), ...(options.due ? { dueBy: this.clock.now() } : {}) }, cap);
    return Object.fromEntries(statuses.map((s) => [s, counts[s] ?? 0])) as Record<TaskStatus, number>;
  }

  /**
   * Waits for the task to finish: resolves with its output when it succeeds; rejects with
   * TaskFailedError (its `cause` is the task's error) or TaskCancelledError — or, for a task whose
   * cleanup after a failure or a cancel failed for good, with that error itself (code
   * COMPENSATION_FAILED: what the task did is not fully undone; its message names what ended the
   * task and each failure). A store that is unavailable for a while (STORE_UNAVAILABLE) is waited
   * out until the timeout.
   */
  async result<O = unknown>(id: string, options: ResultOptions = {}): Promise<O> {
    const store = await this.#open();
    if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A task id is required.');
    const deadline = options.timeout === undefined ? Infinity : this.clock.now() + toMs(options.timeout, 'timeout');
    // With a live subscription a finished task is announced, and polling only covers what is
    // not (a notification sent while the listener reconnected, a task that a lease expiry ended).
    let pollMs = (await this.#listenSettled(store)) ? 250 : 25;
    // Listening starts before the first read: news that arrives while a read is in flight is kept
    // (the read may have seen the task unfinished). News from this process's own workers and
    // commands hands over the finished row, which is then not read again (result-waiters.ts).
    // A store whose calls hang (a network that drops packets) must not hold a read past the timeout.
    const late = (): Error => new TimeoutError(`Task ${id} could not be read within the timeout of ${String(options.timeout)}: the store did not answer.`);
    const watch = this.#waiters.watch(id);
    // A task this engine created and has heard no end of yet is not read first (result-waiters.ts).
    let read = !this.#waiters.knownUnfinished(id);
    try {
      for (;;) {
        watch.reset();
        // A blip of the store while waiting (a dropped connection, a database restarting) is waited
        // out like an unfinished task, until the deadline.
        const row = watch.settled ?? (!read ? null : await this.#waiters.read(store, id, deadline, late).then(
          (r) => {
            if (!r) throw new TaskNotFoundError(id);
            return r;
          },
          (e: unknown) => {
            if (!isStepwiseError(e, ERROR_CODES.STORE_UNAVAILABLE) || this.clock.now() >= deadline) throw e;
            return null;
          },
        ));
        if (row?.status === 'succeeded') return decodeJson(row.output) as O;
        if (row?.status === 'failed') {
          const error = row.error ? deserializeError(decodeError(row.error)) : undefined;
          // People must act on a failed cleanup, whatever ended the task: its error says what to undo.
          if (isStepwiseError(error, ERROR_CODES.COMPENSATION_FAILED)) throw error;
          throw new TaskFailedError(id, error);
        }
        if (row?.status === 'cancelled') throw new TaskCancelledError(id, row.cancelReason ?? undefined);
        options.signal?.throwIfAborted();
        const remaining = deadline - this.clock.now();
        if (remaining <= 0) throw new TimeoutError(`Task ${id} is still ${row?.status ?? 'unfinished'} after waiting ${options.timeout}.`);
        const woken = await watch.next(Math.min(pollMs, remaining), options.signal);
        pollMs = Math.min(1000, pollMs * 2);
        // A poll need not read a task that a worker of this process runs: that worker announces
        // the end of its run here (with the row, when it wrote the end).
        read = woken === 'news' || !this.#heldHere(id);
      }
    } finally {
      watch.close();
    }
  }

  /**
   * Subscribes to finished tasks of other processes, once. Without it (a store with no channel, or
   * a failed subscription) `result()` still finds the outcome by polling.
   */
  async #listenSettled(store: Store): Promise<boolean> {
    if (!store.subscribe || this.#closed) return false;
    if (this.#settledLive) return true;
    this.#settled ??= store.subscribe((e) => this.#deliver(e), 'settled').then(
      (off) => {
        // The listener reconnects by itself from now on.
        this.#settledLive = true;
        return off;
      },
      () => {
        this.#settled = null;
        return null;
      },
    );
    // Not longer than a second: a database that is slow to take a new connection should not hold
    // up a result that polling can find (the subscription goes on in the background).
    let timer: NodeJS.Timeout | undefined;
    const live = await Promise.race([this.#settled.then((off) => off !== null), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 1000)))]);
    clearTimeout(timer);
    return live;
  }

  /**
   * Cancels a task. A running task becomes `cancelling`, its step's AbortSignal fires in whichever
   * worker holds it, its cleanup runs (`ctx.onCancel` handlers, compensations), and it ends
   * `cancelled` — or `failed` with a COMPENSATION_FAILED error if the cleanup failed for good. A
   * pending, waiting or paused task ends `cancelled` at once, unless its last run left such cleanup
   * to do: then it is `cancelling` until a worker serving its workflow has replayed it and run the
   * cleanup. A cancelled task never resumes.
   */
  async cancel(id: string, options: CommandOptions & { reason?: string } = {}): Promise<TaskSummary> {
    const reason = options.reason ?? null;
    if (reason !== null && (typeof reason !== 'string' || reason.length > 1000)) {
      throw new InvalidArgumentError('A cancel reason must be a string of at most 1000 characters.');
    }
    if (reason !== null) checkText(reason, 'The cancel reason');
    const row = await this.#command(id, 'cancel', options.by, () => ({ set: { cancelReason: reason }, detail: { reason } }), reason);
    return toSummary(row);
  }

  /**
   * Runs a failed task again from the step that failed (or from `fromStep`, forgetting it and every
   * later call); completed steps before it are not re-run. The task's last cleanup is forgotten
   * (it runs again if the task ends so again), and so is every step that cleanup undid (its
   * compensation completed), with what the code did after receiving it: those run again, at the
   * same journal positions. A step whose compensation failed was not undone and is kept (unless
   * the code made it after receiving an undone or retried step). `deadline` gives the retried task
   * a new deadline; without it, a deadline that has passed is lifted.
   */
  async retry(id: string, options: RetryTaskOptions = {}): Promise<TaskSummary> {
    const store = await this.#open();
    const newDeadline = options.deadline === undefined ? undefined : taskDeadline(this.clock.now(), options.deadline, undefined);
    const row = await this.#command(id, 'retry', options.by, async (task) => {
      const refusal = retryRefusal(task);
      if (refusal) throw new ConflictError(refusal);
      const steps = await store.getSteps(id);
      // The cleanup of the failure being retried is forgotten: it runs again if the task ends so again.
      const cleanup = steps.filter((s) => isCleanupSeq(s.seq)).sort((a, b) => a.seq - b.seq);
      const journal = steps.filter((s) => !isCleanupSeq(s.seq));
      // The steps that cleanup undid run again, and so does what the code did after receiving them.
      const undone = undoneSteps(journal, cleanup);
      const undoneRows = forgetUndone(journal, undone);
      const forget = (rows: readonly StepRow[], keep?: StepRow): { deleteSteps: number[]; forgotten: string[] } => {
        const code = new Map(undoneRows);
        for (const s of rows) code.set(s.seq, s);
        if (keep) code.delete(keep.seq);
        const all = [...[...code.values()].sort((a, b) => a.seq - b.seq), ...cleanup];
        return { deleteSteps: all.map((s) => s.seq), forgotten: all.map((s) => s.name) };
      };
      const undoneDetail = undone.length ? { undone: undone.map((s) => s.name) } : {};
      // The retried task's deadline; undone steps run again under new idempotency keys (failure/redo.ts).
      const columns = { ...retryDeadline(task, newDeadline, this.clock.now()), ...(undone.length ? { redo: countRedo(task.redo, undone.map((s) => s.name)) } : {}) };
      if (options.fromStep !== undefined) {
        const from = planRetryFrom(journal, options.fromStep, id);
        const later = new Set(from.deleteSteps);
        const { deleteSteps, forgotten } = forget(journal.filter((s) => later.has(s.seq)));
        return {
          set: { error: null, incrementRetries: true, ...columns },
          deleteSteps,
          detail: { retry: task.retries + 1, fromStep: options.fromStep, ...undoneDetail, forgotten },
        };
      }
      // A signal sent to the failed task replaces the one an event wait had received (a payload
      // the workflow could not handle): that wait and everything after it run again.
      const replaced = replacedWait(journal, await store.getSignals(id));
      if (replaced) {
        const { deleteSteps, forgotten } = forget(journal.filter((s) => s.seq === replaced.seq || (s.seq > replaced.seq && (s.done === null || (replaced.done !== null && s.done > replaced.done)))));
        return {
          set: { error: null, incrementRetries: true, ...columns },
          deleteSteps,
          detail: { retry: task.retries + 1, fromStep: replaced.name, replacedSignal: true, ...undoneDetail, forgotten },
        };
      }
      const failure = retryPoint(task, journal);
      // The failed step is reset, unless the code made it after receiving an undone step (then it
      // is forgotten with that step's consequences: the code may take another path to it).
      const reset = failure && !undone.some((u) => calledAfterReceiving(failure, u)) ? failure : undefined;
      // The earliest of the calls that run again, for the log.
      const first = [...(reset ? [reset] : []), ...undone].sort((a, b) => a.seq - b.seq)[0];
      if (!reset) {
        const { deleteSteps, forgotten } = forget([]);
        return {
          set: { error: null, incrementRetries: true, ...columns },
          ...(deleteSteps.length ? { deleteSteps } : {}),
          detail: { retry: task.retries + 1, fromStep: first?.name ?? null, ...undoneDetail, ...(forgotten.length ? { forgotten } : {}) },
        };
      }
      // The failed step runs again with a fresh attempt budget (its error stays as `lastError`),
      // and what the code did after receiving that failure (a compensation, a log step, a wait)
      // is forgotten: on retry the code takes that path again only if the step fails again. A
      // call made before the code received the failure (a Promise.all branch beside the failed
      // step) is not a consequence of it: it is kept, so a completed side effect is not repeated.
      const { deleteSteps, forgotten } = forget(consequencesOf(journal, reset), reset);
      return {
        set: { error: null, incrementRetries: true, ...columns },
        steps: [{ ...reset, status: 'retrying', attempts: 0, wakeAt: null, finishedAt: null, done: null }],
        deleteSteps,
        detail: { retry: task.retries + 1, fromStep: (first ?? reset).name, ...undoneDetail, forgotten },
      };
    });
    return toSummary(row);
  }

  /** Pauses a task: a running one at its next step boundary; a pending or waiting one at once. */
  async pause(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    return toSummary(await this.#command(id, 'pause', options.by, () => ({})));
  }

  /** Resumes a paused task (or withdraws a pause request that a running task has not reached). */
  async resume(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    return toSummary(await this.#command(id, 'resume', options.by, () => ({})));
  }

  /**
   * Sends an event to a task; `ctx.waitForEvent(name)` receives it. Events sent before the task
   * waits are kept. With an idempotency key, a repeated send is recorded once.
   * @returns whether this call recorded a new event (false for a repeated key)
   */
  async signal(id: string, name: string, payload?: unknown, options: SignalOptions = {}): Promise<SignalResult> {
    const store = await this.#open();
    const actor = actorOf(options.by);
    if (typeof name !== 'string' || !/^[^|]{1,200}$/.test(name)) throw new InvalidArgumentError('A signal needs a name of 1-200 characters without "|".');
    checkText(name, `The signal name ${JSON.stringify(name)}`);
    if (name.startsWith(RESERVED_SIGNAL_PREFIX)) {
      throw new InvalidArgumentError(`Signal names starting with "${RESERVED_SIGNAL_PREFIX}" are reserved for approvals: decide an approval with engine.decide(approvalId, …) / \`stepwise approve\`.`);
    }
    if (name.startsWith(MACHINE_SIGNAL_PREFIX)) {
      throw new InvalidArgumentError(`Signal names starting with "${MACHINE_SIGNAL_PREFIX}" are reserved for the events of state machines: send one with engine.send(id, event, payload) / \`stepwise send\`.`);
    }
    const key = options.idempotencyKey;
    if (key !== undefined) checkKey(key, "A signal's idempotencyKey");
    let encoded: string | null;
    try {
      encoded = encodeJson(payload, `The payload of signal "${name}"`);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message, { cause: e });
    }
    checkSize(encoded, this.limits.payloadBytes, () => `The payload of signal "${name}"`, 'payloadBytes');
    const task = await this.#row(store, id);
    // The workflow's declared schema of this signal, if this engine knows the definition.
    const schema = this.#workflows.get(task.workflow)?.options.signals?.[name];
    if (schema) {
      try {
        schema.parse(payload);
      } catch (e) {
        throw new InvalidInputError(task.workflow, `the payload of signal "${name}" to task ${id} fails its schema, and was not sent: ${coerceError(e).message}`, { cause: e });
      }
    }
    // A signal sent again with its key gets the first answer, also after the task finished; the
    // same key with another payload is a conflict the sender must hear of.
    const repeat = key === undefined ? undefined : await this.#signalByKey(store, id, key);
    if (repeat) return this.#repeated(id, name, encoded, key as string, repeat);
    // A failed task may be retried: a signal sent to it is kept (a corrected payload replaces the
    // one its wait received when the task is retried). Succeeded and cancelled tasks take none.
    if (isFinished(task.status) && task.status !== 'failed') throw new IllegalTransitionError(task.status, 'signal', userEvents(task), id);
    const awaited = task.status === 'waiting' ? (task.waitEvents ?? []) : null;
    if (options.requireWaiting && task.status !== 'running' && !awaited?.includes(name)) {
      throw new ConflictError(
        `Task ${id} is not waiting for "${name}": ${awaited?.length ? `it waits for ${awaited.map((n) => `"${n}"`).join(', ')}` : `it is ${task.status} and waits for no event`}. Nothing was sent.`,
        { recorded: { status: task.status, waitingFor: awaited ?? [] } },
      );
    }
    const wake: WakeEvent = { reason: 'task', taskId: id, workflow: task.workflow };
    const res = await store.insertSignal({ taskId: id, name, payload: encoded, idempotencyKey: key ?? null, at: this.clock.now(), actorKind: actor.kind, actorId: actor.id, notify: wake });
    if (!res) throw new TaskNotFoundError(id);
    if (!res.created) {
      // Another call with the same key won the race: its signal is the answer.
      const first = await this.#signalByKey(store, id, key as string);
      if (first) return this.#repeated(id, name, encoded, key as string, first);
    }
    this.#deliver(wake);
    this.#appended(id);
    return { created: true, delivered: awaited?.includes(name) ? 'waiting' : 'queued' };
  }

  async #signalByKey(store: Store, id: string, key: string): Promise<SignalRow | undefined> {
    return (await store.getSignals(id)).find((s) => s.idempotencyKey === key);
  }

  /** The answer to a signal sent again with the key of `first`. */
  #repeated(id: string, name: string, payload: string | null, key: string, first: SignalRow): SignalResult {
    if (first.name !== name || !jsonEqual(decodeJson(first.payload), decodeJson(payload))) {
      throw new ConflictError(
        `Signal key "${key}" of task ${id} was used for signal "${first.name}" with another payload: a repeated send must be the same signal. Use a new key for a new signal.`,
        { recorded: { name: first.name, payload: decodeJson(first.payload) } },
      );
    }
    return { created: false, delivered: first.consumedSeq === null ? 'queued' : 'consumed' };
  }

  /**
   * Sends an event to a state machine's task (`machine()`): taken only while the machine waits in
   * a state that takes it and a guard lets it through; otherwise refused with EventRefusedError
   * (EVENT_REFUSED, naming the state and the events it takes now) and nothing is sent. Of events
   * sent at once, one is taken and the rest refused (the machine is busy with it). With an
   * idempotency key, a repeated send gets the first answer.
   * @example
   * await engine.send(orderId, 'approve', { note: 'ok' }, { by: 'alice', idempotencyKey: 'approve-8001' });
   */
  async send(id: string, event: string, payload?: unknown, options: SignalOptions = {}): Promise<SendResult> {
    const store = await this.#open();
    return sendEvent({
      store, now: () => this.clock.now(), payloadBytes: this.limits.payloadBytes,
      machineOf: (workflow) => machineOf(this.#workflows.get(workflow)),
      task: (taskId) => this.#row(store, taskId),
      delivered: (wake, taskId) => {
        this.#deliver(wake);
        this.#appended(taskId);
      },
    }, id, event, payload, actorOf(options.by), options.idempotencyKey);
  }

  /**
   * Records a decision on one approval (see `src/approvals/decide.ts`): a repeat returns the first
   * result; a contrary decision is a ConflictError naming the recorded one; someone not listed, or
   * an expired approval, is a ForbiddenError; a task that ended is a TaskEndedError. Returns once
   * the decision is durable and, if it settles the approval, the task is runnable.
   * @example
   * await engine.decide(approvalId, { approve: true, by: 'alice', comment: 'ship it' });
   */
  async decide(approvalId: string, options: DecideOptions): Promise<ApprovalInfo> {
    const store = await this.#open();
    return decideApproval(
      {
        store, clock: this.clock, payloadBytes: this.limits.payloadBytes,
        delivered: (wake, taskId) => {
          this.#deliver(wake);
          this.#appended(taskId);
        },
        tell: (n) => notify(this.#observers, 'onApproval', n),
        hasObservers: this.#observers.some((o) => typeof o.onApproval === 'function'),
      },
      approvalId,
      options,
    );
  }

  /** Approvals across tasks, oldest first: by status, listed approver (a reviewer's queue), workflow or task. */
  async approvals(query: ApprovalsQuery = {}): Promise<ApprovalInfo[]> {
    return listApprovals(await this.#open(), query);
  }

  /**
   * The event log as it grows: one task's entries (`taskId`, resumable by `after: seq`) or every
   * task's (resumable by `after: cursor`), read from the store, so it sees what every process
   * writes. Across tasks a task's step results (`step:completed`, `step:failed`: a step's result is
   * stored once, in its journal row) come with the task's next entry of its own (a park, a signal,
   * its end…), right before it: every entry once, each task's in order. It keeps waiting for new entries unless `follow: false`; a task's stream ends once the
   * task has succeeded or been cancelled. Break out of the loop (or abort `signal`) to stop. With
   * `{ taskId, streams: true }` it also carries the task's live stream frames (see `EventsOptions.streams`).
   * @example
   * for await (const e of engine.events({ taskId: id })) console.log(e.seq, e.type, e.actor.id);
   */
  events(options: EventsOptions & { taskId: string; streams: true }): AsyncIterable<TaskEvent | StreamEvent>;
  events(options: EventsOptions & { taskId: string }): AsyncIterable<TaskEvent>;
  events(options?: EventsOptions): AsyncIterable<TaskEvent & { cursor?: string }>;
  events(options: EventsOptions = {}): AsyncIterable<(TaskEvent & { cursor?: string }) | StreamEvent> {
    checkStreamOptions(options);
    if (options.taskId !== undefined && (typeof options.taskId !== 'string' || !options.taskId)) throw new InvalidArgumentError('events(): taskId must be a task id.');
    if (options.taskId !== undefined && options.after !== undefined && (typeof options.after !== 'number' || !Number.isInteger(options.after) || options.after < 0)) {
      throw new InvalidArgumentError('events({ taskId, after }): after is the last seq seen, a whole number ≥ 0.');
    }
    if (options.taskId === undefined && options.after !== undefined && typeof options.after !== 'string') {
      throw new InvalidArgumentError('events({ after }) across tasks takes the cursor of an earlier event (a string), or "now".');
    }
    if (options.pollMs !== undefined) toMs(options.pollMs, 'pollMs');
    const bus = this.#bus;
    // The settled channel tells a reader elsewhere at once that a task finished.
    const open = async (): Promise<Store> => {
      const store = await this.#open();
      await this.#listenSettled(store);
      return store;
    };
    return {
      [Symbol.asyncIterator]: async function* () {
        const store = await open();
        if (options.taskId !== undefined) {
          if (!(await store.getTask(options.taskId))) throw new TaskNotFoundError(options.taskId);
          yield* taskEvents(store, bus, options.taskId, options);
        } else {
          yield* allEvents(store, bus, options);
        }
      },
    };
  }

  /** Why a task is (not) moving: what it waits for, who holds it, what it may do next. */
  async explain(id: string): Promise<Explanation> {
    const store = await this.#open();
    const row = await this.#row(store, id);
    const steps = await store.getSteps(id);
    const now = this.clock.now();
    const last = steps[steps.length - 1];
    const lease = row.leaseOwner && row.leaseExpiresAt !== null ? { owner: row.leaseOwner, expiresAt: row.leaseExpiresAt, expired: row.leaseExpiresAt <= now } : null;
    const wait = row.wait ? (JSON.parse(row.wait) as Record<string, unknown>) : null;
    const error = row.error ? decodeError(row.error).message : null;
    const local = this.#workflows.get(row.workflow);
    const registered = [
      ...(local ? [local.version, ...(local.options.compatibleVersions ?? []).map(String)] : []),
      ...(await store.listWorkflows()).filter((w) => w.name === row.workflow).map((w) => w.version),
    ];
    const machine = machineInfo(row, steps);
    const summary = explainSummary(row, { now, lease, wait, error, registered });
    return {
      id,
      status: row.status,
      summary: machine ? machineSummary(row, machine, wait, summary) : summary,
      legalEvents: userEvents(row).filter((ev) => ev !== 'retry' || !retryRefusal(row)),
      lease,
      wait,
      runAt: row.runAt,
      lastStep: last ? { name: last.name, status: last.status, attempts: last.attempts, error: last.error ? decodeError(last.error).message : null } : null,
      error,
      ...(machine ? { machine: { state: machine.state, legalEvents: machine.legalEvents } } : {}),
    };
  }

  /**
   * A worker that runs this engine's workflows. Call `start()` on it.
   * @example
   * const worker = engine.worker({ concurrency: 8 }); await worker.start(); … await worker.stop();
   */
  worker(options: WorkerOptions = {}): Worker {
    if (this.#closed) throw new ClosedError('The engine');
    const w = new Worker(
      {
        store: () => this.#open(),
        clock: this.clock,
        workflows: () => this.#workflows,
        bus: this.#bus,
        observers: this.#observers,
        idempotency: this.idempotency,
        outputBytes: this.limits.outputBytes,
        retention: this.#retention,
        onStopped: (worker) => this.#workers.delete(worker),
      },
      options,
    );
    this.#workers.add(w);
    return w;
  }

  /**
   * Deletes a finished task (succeeded, failed or cancelled) with its journal, log, signals,
   * approvals and stream chunks, and returns it as it was. A task that is not finished is a
   * CONFLICT (cancel it first); an unknown id is TASK_NOT_FOUND, so is a second delete. The task's
   * idempotency key is free again. Observers' `onTasksDeleted` hears of it.
   * @example
   * await engine.delete(id, { by: 'ops' });
   */
  async delete(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    const store = await this.#open();
    return toSummary(await deleteTask({ store, clock: this.clock, observers: this.#observers }, id, actorOf(options.by)));
  }

  /**
   * Deletes every finished task that ended at least `olderThan` ago (of the given statuses and
   * workflows), each with everything it owns, a thousand per statement; `dryRun` only counts them.
   * For tasks a retention policy does not cover (another engine's workflows, a one-off cleanup).
   * @example
   * await engine.purge({ olderThan: '30d', status: ['succeeded', 'cancelled'] });   // { count, byStatus, dryRun }
   */
  async purge(options: PurgeOptions & CommandOptions): Promise<PurgeResult> {
    const store = await this.#open();
    return purgeTasks({ store, clock: this.clock, observers: this.#observers }, options, actorOf(options?.by));
  }

  /** Stops this engine's workers (gracefully) and closes the store. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#workers].map((w) => w.stop()));
    await this.#unsubscribe?.();
    await (await this.#settled)?.();
    this.#waiters.forget();
    this.#offTail?.();
    await this.#tail?.idle();
    if (this.#ready) {
      const store = await this.#ready.catch(() => null);
      if (store && typeof this.#storeOption === 'string') await store.close();
    }
  }

  async #row(store: Store, id: string): Promise<TaskRow> {
    if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A task id is required.');
    const row = await store.getTask(id);
    if (!row) throw new TaskNotFoundError(id);
    return row;
  }

  /** A user command: plan the transition from the current row, write it with compare-and-set. */
  async #command(
    id: string,
    event: LifecycleEvent,
    by: By | undefined,
    build: (task: TaskRow) => CommandWrite | Promise<CommandWrite>,
    cancelReason?: string | null,
  ): Promise<TaskRow> {
    const actor = actorOf(by);
    const store = await this.#open();
    for (let attempt = 0; attempt < 20; attempt++) {
      const task = await this.#row(store, id);
      const extra = await build(task);
      const { write } = planTransition({
        taskId: id, state: task, event, guard: { version: task.version }, at: this.clock.now(), actor,
        ...(extra.set ? { set: extra.set } : {}), detail: extra.detail, ...(extra.steps ? { steps: extra.steps } : {}),
        ...(extra.deleteSteps ? { deleteSteps: extra.deleteSteps } : {}),
        notify: (edge) => wakeFor(edge, id, task.workflow, cancelReason),
      });
      const row = await store.transition(write);
      if (row) {
        if (write.notify) this.#deliver(write.notify, row);
        this.#appended(id);
        return row;
      }
    }
    throw new ConcurrentUpdateError(id);
  }

  #heldHere(taskId: string): boolean {
    for (const w of this.#workers) if (w.holds(taskId)) return true;
    return false;
  }

  /** Tells this process's log readers that entries of `taskId` were committed. */
  #appended(taskId: string): void {
    if (this.#bus.hears('log:appended')) this.#bus.emit('log:appended', { taskId });
  }

  /**
   * Passes news about a task to this process's workers and waiters (local or from NOTIFY); `row`:
   * the task as the write this news announces committed it (only for a write of this process).
   */
  #deliver(e: WakeEvent, row?: TaskRow): void {
    if (e.taskIds) {
      // One notification for a batch of tasks: the same news of each.
      for (const taskId of e.taskIds) this.#deliver({ reason: e.reason, taskId, ...(e.workflow ? { workflow: e.workflow } : {}) });
      return;
    }
    switch (e.reason) {
      case 'task':
        this.#bus.emit('task:ready', { taskId: e.taskId, workflow: e.workflow ?? null });
        break;
      case 'cancel':
        this.#bus.emit('task:cancel', { taskId: e.taskId, reason: e.cancelReason ?? null });
        break;
      case 'pause':
        this.#bus.emit('task:pause', { taskId: e.taskId });
        break;
      case 'resume':
        this.#bus.emit('task:resume', { taskId: e.taskId });
        break;
      case 'settled':
        if (row?.id === e.taskId) this.#bus.emit('task:settled', { taskId: e.taskId, status: row.status, row });
        // A task a worker of this process runs: that worker announces the end of its run itself,
        // with the row when it wrote the end (the notification of that write may arrive first).
        else if (!this.#heldHere(e.taskId)) this.#bus.emit('task:settled', { taskId: e.taskId, status: '' });
        break;
    }
  }
}

function explainSummary(
  row: TaskRow,
  c: { now: number; lease: Explanation['lease']; wait: Record<string, unknown> | null; error: string | null; registered: string[] },
): string {
  const at = (ms: number | null): string => (ms === null ? 'never' : new Date(ms).toISOString());
  // Failed from outside (the dwell scanner) with compensations to run: see failure/failed-outside.ts.
  if ((row.status === 'pending' || row.status === 'waiting') && c.error !== null) {
    return `Failing: ${c.error} A worker serving "${row.workflow}" version ${row.workflowVersion} replays it and runs its compensations; then it ends failed.`;
  }
  switch (row.status) {
    case 'pending':
      if (!c.registered.length) return `Pending, but no worker has ever registered workflow "${row.workflow}": start a worker that exports it.`;
      if (!c.registered.includes(row.workflowVersion)) {
        return `Pending, but it was started under version ${row.workflowVersion} of "${row.workflow}" and workers have registered only version(s) ${[...new Set(c.registered)].join(', ')}: run a worker with version ${row.workflowVersion}, or list it in compatibleVersions if the new code can replay it.`;
      }
      return row.runAt !== null && row.runAt > c.now
        ? `Pending until ${at(row.runAt)} (delayed start).`
        : `Pending and due: the next worker serving "${row.workflow}" with a free slot will claim it.`;
    case 'running':
      if (c.lease?.expired) return `Running, but the lease of worker ${c.lease.owner} expired at ${at(c.lease.expiresAt)}: that worker is probably dead; another worker will reclaim the task.`;
      return `Running on worker ${c.lease?.owner ?? '?'} (lease until ${at(c.lease?.expiresAt ?? null)})${row.pauseRequested ? '; a pause is requested and takes effect at the next step boundary' : ''}.`;
    case 'waiting': {
      const w = c.wait ?? {};
      const until = (t: unknown): string => (typeof t === 'number' ? ` until ${at(t)}` : '');
      const one = (x: Record<string, unknown>): string => {
        if (x.kind === 'event') {
          const names = Array.isArray(x.events) ? (x.events as string[]).map((e) => `"${e}"`).join(' or ') : `"${String(x.event)}"`;
          return `event ${names}${until(x.until) || ' (no timeout)'}`;
        }
        if (x.kind === 'approval') {
          const who = Array.isArray(x.approvers) && x.approvers.length ? (x.approvers as string[]).join(', ') : 'anyone';
          return `approval "${String(x.name)}" (${String(x.approval)}, level ${String(x.level ?? 1)}) from ${who}${until(x.until) || ' (no deadline)'}; decide with \`stepwise approve ${String(x.approval)} --as <name>\` or \`stepwise reject …\``;
        }
        if (x.kind === 'retry') return `the retry of step "${String(x.step)}" (attempt ${String(x.attempt)})${until(x.until)}`;
        if (x.kind === 'sleep') return `the end of sleep "${String(x.step)}"${until(x.until)}`;
        return `its wake-up time${until(row.runAt)}`;
      };
      const hint = (list: Array<Record<string, unknown>>): string =>
        list.some((x) => x.kind === 'event') ? '; send events with engine.signal / `stepwise signal`' : '';
      if (w.kind === 'several' && Array.isArray(w.waits)) {
        const list = w.waits as Array<Record<string, unknown>>;
        return `Waiting for the first of: ${list.map(one).join('; ')}${hint(list)}.`;
      }
      return `Waiting for ${one(w)}${hint([w])}.`;
    }
    case 'paused':
      return 'Paused by a user: resume it to continue.';
    case 'cancelling':
      if (!c.lease) {
        // Cancelled while no worker held it (waiting, paused, pending), with cleanup to run.
        const fallback = `if none takes it within a lease period, any worker's heartbeat ends it cancelled without running that cleanup`;
        const head = `Cancelling${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}: waiting for a worker serving "${row.workflow}" version ${row.workflowVersion} to run its cleanup (onCancel handlers, compensations)`;
        if (!c.registered.includes(row.workflowVersion)) return `${head}; no worker has registered that version yet; ${fallback}.`;
        return `${head}; ${fallback}.`;
      }
      if (c.lease.expired) {
        const dead = `Cancelling${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}, but the lease of worker ${c.lease.owner} expired at ${at(c.lease.expiresAt)}: that worker is probably dead`;
        const fallback = `once the lease has been expired for a further lease period, any worker's heartbeat ends the task cancelled without running its cleanup (onCancel handlers, compensations)`;
        if (!c.registered.includes(row.workflowVersion)) {
          return `${dead}; no worker has registered version ${row.workflowVersion} of "${row.workflow}", so none can take it over and finish its cleanup: ${fallback}, unless a worker with that version starts first.`;
        }
        return `${dead}; a worker serving "${row.workflow}" version ${row.workflowVersion} with a free slot takes it over and finishes its cleanup; if none does, ${fallback}.`;
      }
      return `Cancelling: worker ${c.lease.owner} has been told to stop the run and runs its cleanup${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}.`;
    case 'succeeded':
      return `Succeeded at ${at(row.finishedAt)}.`;
    case 'failed': {
      const cleanup = failedCleanup(row);
      if (cleanup?.cancelled) {
        return `Failed in its cleanup after a cancel${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}: ${c.error ?? 'unknown error'} A cancelled task is not retried: undo by hand what the error names, then start a new task if the work is still wanted.`;
      }
      if (cleanup) return `Failed, and its cleanup failed too: ${c.error ?? 'unknown error'} Undo by hand what the error names; retry it to run again from the failed step.`;
      return `Failed: ${c.error ?? 'unknown error'}. Retry it to run again from the failed step.`;
    }
    case 'cancelled':
      return `Cancelled${row.cancelReason ? `: ${row.cancelReason}` : ''}. A cancelled task never resumes.`;
  }
}

/** The summary of a state machine's task: its state first, and what it waits for in the machine's words. */
function machineSummary(row: TaskRow, m: MachineInfo, wait: Record<string, unknown> | null, summary: string): string {
  if (m.legalEvents.length) {
    const until = typeof wait?.until === 'number' ? `; at ${new Date(wait.until).toISOString()} its timeout moves it on` : '';
    return `In state "${m.state}", waiting for one of its events: ${m.legalEvents.join(', ')}${until}. Send one with engine.send / \`stepwise send ${row.id} <event>\`.`;
  }
  if (row.status === 'running') return `In state "${m.state}" (its entry action runs, or it moves on): it takes events once it waits. ${summary}`;
  return `In state "${m.state}". ${summary}`;
}

/** The data of a failed task's COMPENSATION_FAILED error (its cleanup failed for good), or null. */
function failedCleanup(row: TaskRow): { cancelled: boolean } | null {
  if (row.status !== 'failed' || !row.error) return null;
  const error = decodeError(row.error);
  return error.code === ERROR_CODES.COMPENSATION_FAILED ? { cancelled: error.data?.cancelled === true } : null;
}

/** Why `task` may not be retried although it failed: it was cancelled (its cleanup then failed), or null. */
function retryRefusal(task: TaskRow): string | null {
  if (!failedCleanup(task)?.cancelled) return null;
  return `Task ${task.id} was cancelled and its cleanup then failed: a cancelled task never resumes, so it cannot be retried. Undo by hand what its error names (it says what could not be undone), then start a new task if the work is still wanted.`;
}

/** What a command writes besides the status change. */
interface CommandWrite {
  set?: TaskPatch;
  detail?: unknown;
  steps?: StepRow[];
  deleteSteps?: number[];
}

/**
 * The failed step a retry starts from: the one named by the task's error (a StepFailedError in
 * the error or its causes), else the last result the code received, if that was a failure.
 */
function retryPoint(task: TaskRow, journal: readonly StepRow[]): StepRow | undefined {
  const named = task.error ? failedStepOf(decodeError(task.error)) : undefined;
  const failed = journal.filter((s) => s.status === 'failed');
  const byName = failed.find((s) => s.name === named);
  if (byName) return byName;
  const last = journal.filter((s) => s.done !== null).sort((a, b) => (b.done as number) - (a.done as number))[0];
  return last?.status === 'failed' ? last : undefined;
}

/**
 * The earliest event wait whose received signal a newer, unconsumed signal of one of its names
 * replaces (sent after the wait received its own), or undefined.
 */
function replacedWait(journal: readonly StepRow[], signals: readonly SignalRow[]): StepRow | undefined {
  const waits = journal
    .filter((s) => s.kind === 'event' && s.status === 'completed' && s.done !== null && s.finishedAt !== null)
    .sort((a, b) => (a.done as number) - (b.done as number));
  return waits.find((w) => {
    const names = (w.name.split('#')[0] as string).split('+');
    const received = signals.find((sig) => sig.consumedSeq === w.seq);
    return received && signals.some((sig) => sig.consumedSeq === null && sig.id > received.id && names.includes(sig.name));
  });
}

/** The step whose failure failed the task: a StepFailedError in the error or its causes. */
function failedStepOf(error: SerializedError): string | undefined {
  for (let e: SerializedError | undefined = error; e; e = e.cause) {
    if (e.code === 'STEP_FAILED' && typeof e.data?.stepName === 'string') return e.data.stepName;
  }
  return undefined;
}
