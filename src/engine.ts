/**
 * @module engine
 * The Engine: a façade over the command modules (src/commands/) and the factory of workers. Every
 * status change goes through the lifecycle table and one guarded store write.
 */
import type { Clock } from './clock.ts';
import type { TaskStatus } from './lifecycle.ts';
import type { Store } from './store.ts';
import { toSummary, type TaskInfo, type TaskSummary } from './task-info.ts';
import type { TaskEvent } from './task-events.ts';
import type { EventsOptions } from './event-stream.ts';
import type { StreamEvent } from './stream-frames.ts';
import type { Limits } from './limits.ts';
import type { Worker, WorkerOptions } from './worker.ts';
import type { StartManyItem } from './start-plan.ts';
import type { Workflow } from './workflow.ts';
import type { SendResult } from './machine/send.ts';
import type { EffectDecision } from './idempotency/at-most-once.ts';
import { deleteTask, purgeTasks, type PurgeOptions, type PurgeResult } from './retention/purge.ts';
import type { Idempotency } from './idempotency/run.ts';
import type { ApprovalInfo, ApprovalsQuery, DecideOptions } from './approvals/types.ts';
import type { CommandOptions, CountOptions, Explanation, ListOptions, ListResult, ResultOptions, RetryTaskOptions, SignalOptions, SignalResult, StartOptions } from './commands/options.ts';
import { TaskHandle } from './commands/task-handle.ts';
import * as cmd from './commands/index.ts';
import type { EngineOptions } from './commands/engine-options.ts';
import { EngineState } from './commands/engine-state.ts';
import { engineSchedules, type FireSchedules } from './schedules/wiring.ts';
import type { Schedules } from './schedules/schedules.ts';
export { TaskHandle } from './commands/task-handle.ts';
export type { EngineOptions } from './commands/engine-options.ts';

export type {
  By,
  CommandOptions,
  CountOptions,
  Explanation,
  ListOptions,
  ListResult,
  ResultOptions,
  RetryTaskOptions,
  SignalOptions,
  SignalResult,
  StartOptions,
  StartResult,
} from './commands/options.ts';

export class Engine {
  readonly clock: Clock;
  readonly #s: EngineState;
  /** @internal The size limits in force (workers check outputs against them). */
  readonly limits: Required<Limits>;
  /** Idempotency records: `run(key, fn, { ttl, whileRunning, fingerprint })` runs `fn` once per key across processes (docs/exactly-once.md). */
  readonly idempotency: Idempotency;
  /** Cron schedules: each tick starts one task, however many workers run (docs/schedules.md). */
  readonly schedules: Schedules;
  readonly #fireSchedules: FireSchedules;

  /**
   * @example
   * const engine = new Engine({ store: 'sqlite:./stepwise.db', workflows: [publish] });
   */
  constructor(options: EngineOptions = {}) {
    this.#s = new EngineState(options);
    this.clock = this.#s.clock;
    this.limits = this.#s.limits;
    this.idempotency = cmd.engineIdempotency(options.idempotency, this.#s.ctx);
    ({ schedules: this.schedules, fire: this.#fireSchedules } = engineSchedules({
      open: () => this.#s.open(),
      clock: this.clock,
      start: (wf, input, o) => this.start(wf, input, o),
      get: (id) => this.get(id, { steps: false, history: false }),
      cancel: (id, o) => this.cancel(id, o),
    }));
  }

  /** Adds a workflow definition. A second definition with the same name replaces the first. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  register(wf: Workflow<any, any>): this {
    this.#s.register(wf as Workflow);
    return this;
  }

  /** The registered workflow definitions, by name. */
  get workflows(): ReadonlyMap<string, Workflow> {
    return this.#s.workflows;
  }

  /**
   * Opens the store and applies migrations (done on first use; call it to fail fast). Once open, each
   * call asks the store again (a read with a 2 s deadline): CLOSED or STORE_UNAVAILABLE for health checks.
   */
  async ready(): Promise<Store> {
    const opened = this.#s.opening;
    const store = await this.#s.open();
    if (opened) await cmd.probeStore(store);
    return store;
  }

  /**
   * Creates a task. With an idempotency key, a second call returns the first task (`created: false`);
   * the same key with another workflow or input is an IdempotencyConflictError.
   * @example
   * const { id } = await engine.start('publish-article', { topic: 'x' }, { idempotencyKey: 'article-8001' });
   */
  start<I, O, In>(workflow: Workflow<I, O, In>, ...args: undefined extends In ? [input?: In, options?: StartOptions] : [input: In, options?: StartOptions]): Promise<TaskHandle<O>>;
  start(workflow: string, input?: unknown, options?: StartOptions): Promise<TaskHandle>;
  async start(workflow: string | Workflow<unknown, unknown, unknown>, input?: unknown, options: StartOptions = {}): Promise<TaskHandle> {
    return new TaskHandle(this, await cmd.startOne(this.#s.starts, workflow, input, options));
  }

  /**
   * Starts many tasks in one round trip (one statement and one commit per 10,000), every item checked
   * first; results in the order of `items` (see docs/api.md).
   * @example
   * const handles = await engine.startMany(docs.map((d) => ({ workflow: 'summarise', input: d, idempotencyKey: d.id })));
   */
  async startMany(items: readonly StartManyItem[]): Promise<TaskHandle[]> {
    return (await cmd.startAll(this.#s.starts, items)).map((r) => new TaskHandle(this, r));
  }

  /** The task with its steps (journal) and history (event log); `{ steps: false, history: false }` reads only the task row. */
  async get(id: string, options: { steps?: boolean; history?: boolean } = {}): Promise<TaskInfo> {
    return cmd.getTask(this.#s.ctx, id, options);
  }

  /**
   * Decides an at-most-once step whose `verify` could not tell whether its effect happened: `rerun`,
   * `skip` (with `result`) or `fail` (docs/exactly-once.md).
   * @example
   * await engine.decideEffect(taskId, 'send-sms', 'skip', { result: { sent: true }, by: 'ops' });
   */
  async decideEffect(taskId: string, step: string, decision: EffectDecision, options: SignalOptions & { result?: unknown } = {}): Promise<ApprovalInfo> {
    return cmd.decisions.decideEffect(this.#s.ctx, taskId, step, decision, options);
  }

  /** Tasks, newest first, optionally by status and workflow, a page at a time. */
  async list(options: ListOptions = {}): Promise<ListResult> {
    return cmd.listTasks(this.#s.ctx, options);
  }

  /**
   * How many tasks there are now, by status (every status asked for is in the answer).
   * @example
   * const { pending, waiting } = await engine.count({ status: ['pending', 'waiting'], workflow: 'publish-article' });
   */
  async count(options: CountOptions = {}): Promise<Record<TaskStatus, number>> {
    return cmd.countTasks(this.#s.ctx, options);
  }

  /**
   * Waits for the task to finish: its output, or TaskFailedError (`cause`: the task's error),
   * TaskCancelledError, or COMPENSATION_FAILED when its cleanup failed for good.
   */
  async result<O = unknown>(id: string, options: ResultOptions = {}): Promise<O> {
    const s = this.#s;
    return cmd.awaitResult<O>({ ctx: s.ctx, waiters: s.waiters, listenSettled: (store) => s.listenSettled(store), heldHere: (taskId) => s.heldHere(taskId) }, id, options);
  }

  /**
   * Cancels a task: a running one becomes `cancelling` (its step's AbortSignal fires, its cleanup
   * runs) and ends `cancelled`; one with no cleanup to do ends `cancelled` at once.
   */
  async cancel(id: string, options: CommandOptions & { reason?: string } = {}): Promise<TaskSummary> {
    return toSummary(await cmd.cancelTask(this.#s.ctx, id, options));
  }

  /** Runs a failed task again from the step that failed (or from `fromStep`); see docs/failure-handling.md. */
  async retry(id: string, options: RetryTaskOptions = {}): Promise<TaskSummary> {
    return toSummary(await cmd.retryTask(this.#s.ctx, id, options));
  }

  /** Pauses a task: a running one at its next step boundary; a pending or waiting one at once. */
  async pause(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    return toSummary(await cmd.moveTask(this.#s.ctx, id, 'pause', options));
  }

  /** Resumes a paused task (or withdraws a pause request that a running task has not reached). */
  async resume(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    return toSummary(await cmd.moveTask(this.#s.ctx, id, 'resume', options));
  }

  /**
   * Sends an event to a task (`ctx.waitForEvent(name)` receives it; events sent before it waits are
   * kept). @returns whether this call recorded a new event (false for a repeated key)
   */
  async signal(id: string, name: string, payload?: unknown, options: SignalOptions = {}): Promise<SignalResult> {
    return cmd.sendSignal(this.#s.ctx, id, name, payload, options);
  }

  /**
   * Sends an event to a state machine's task; refused with EVENT_REFUSED unless its state takes it now.
   * @example
   * await engine.send(orderId, 'approve', { note: 'ok' }, { by: 'alice', idempotencyKey: 'approve-8001' });
   */
  async send(id: string, event: string, payload?: unknown, options: SignalOptions = {}): Promise<SendResult> {
    return cmd.decisions.send(this.#s.ctx, id, event, payload, options);
  }

  /**
   * Records a decision on one approval (docs/approvals.md); returns once it is durable.
   * @example
   * await engine.decide(approvalId, { approve: true, by: 'alice', comment: 'ship it' });
   */
  async decide(approvalId: string, options: DecideOptions): Promise<ApprovalInfo> {
    return cmd.decisions.decide(this.#s.ctx, approvalId, options);
  }

  /** Approvals across tasks, oldest first: by status, listed approver (a reviewer's queue), workflow or task. */
  async approvals(query: ApprovalsQuery = {}): Promise<ApprovalInfo[]> {
    return cmd.decisions.approvals(this.#s.ctx, query);
  }

  /**
   * The event log as it grows, across processes: one task's entries (`taskId`, `after: seq`; with
   * `streams: true` its stream frames too) or every task's (`after: cursor`).
   * @example
   * for await (const e of engine.events({ taskId: id })) console.log(e.seq, e.type, e.actor.id);
   */
  events(options: EventsOptions & { taskId: string; streams: true }): AsyncIterable<TaskEvent | StreamEvent>;
  events(options: EventsOptions & { taskId: string }): AsyncIterable<TaskEvent>;
  events(options?: EventsOptions): AsyncIterable<TaskEvent & { cursor?: string }>;
  events(options: EventsOptions = {}): AsyncIterable<(TaskEvent & { cursor?: string }) | StreamEvent> {
    const s = this.#s;
    // The settled channel tells a reader elsewhere at once that a task finished.
    return cmd.eventLog(
      async () => {
        const store = await s.open();
        await s.listenSettled(store);
        return store;
      },
      s.bus,
      options,
    );
  }

  /** Why a task is (not) moving: what it waits for, who holds it, what it may do next. */
  async explain(id: string): Promise<Explanation> {
    return cmd.explainTask(this.#s.ctx, id);
  }

  /**
   * A worker that runs this engine's workflows. Call `start()` on it.
   * @example
   * const worker = engine.worker({ concurrency: 8 }); await worker.start(); … await worker.stop();
   */
  worker(options: WorkerOptions = {}): Worker {
    return this.#s.newWorker(options, this.idempotency, this.#fireSchedules);
  }

  /**
   * Deletes a finished task with everything it owns and returns it as it was; CONFLICT for one not
   * finished, TASK_NOT_FOUND for an unknown id (docs/operations.md).
   */
  async delete(id: string, options: CommandOptions = {}): Promise<TaskSummary> {
    const store = await this.#s.open();
    return toSummary(await deleteTask({ store, clock: this.clock, observers: this.#s.observers }, id, cmd.actorOf(options.by)));
  }

  /**
   * Deletes every finished task that ended at least `olderThan` ago (of the given statuses and
   * workflows); `dryRun` only counts them.
   * @example
   * await engine.purge({ olderThan: '30d', status: ['succeeded', 'cancelled'] });   // { count, byStatus, dryRun }
   */
  async purge(options: PurgeOptions & CommandOptions): Promise<PurgeResult> {
    const store = await this.#s.open();
    return purgeTasks({ store, clock: this.clock, observers: this.#s.observers }, options, cmd.actorOf(options?.by));
  }

  /** Stops this engine's workers (gracefully) and closes the store. */
  async close(): Promise<void> {
    await this.#s.close();
  }
}
