/**
 * @module engine
 * The Engine: a façade over the command modules (src/commands/) and the factory of workers. Every
 * status change goes through the lifecycle table and one guarded store write.
 */
import { DELETE_OPTIONS, PURGE_OPTIONS, checkOptionKeys } from './option-keys.ts';
import { ENGINE_OF } from './primitives/context.ts';
import { InvalidArgumentError } from './errors.ts';
import type { WorkflowContext } from './workflow.ts';
import type { Clock } from './clock.ts';
import type { TaskStatus } from './lifecycle.ts';
import type { Store, TaskRow } from './store.ts';
import { toSummary, type TaskInfo, type TaskSummary } from './task-info.ts';
import type { TaskEvent } from './task-events.ts';
import type { AlertInfo, AlertsQuery } from './alerts/types.ts';
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
import type {
  CommandOptions,
  CountOptions,
  Explanation,
  ListOptions,
  ListResult,
  MoveOptions,
  ResultOptions,
  RetryTaskOptions,
  ForkOptions,
  SignalOptions,
  SignalResult,
  StartOptions,
  StartResult,
} from './commands/options.ts';
import { TaskHandle } from './commands/task-handle.ts';
import * as cmd from './commands/index.ts';
import type { EngineOptions } from './commands/engine-options.ts';
import type { Schedules } from './schedules/schedules.ts';
import type { DriftFilter, DriftReport, TaskDrift } from './replay/drift.ts';
export { TaskHandle } from './commands/task-handle.ts';

/**
 * The engine a workflow's code runs under (the one whose worker runs the task), for code that
 * starts or looks up other tasks without building a second Engine from the same store URL.
 * @example
 * const report = workflow('report', async (ctx) => { const e = engineOf(ctx); await ctx.step('notify', () => e.signal(otherId, 'done')); });
 */
export function engineOf(ctx: WorkflowContext): Engine {
  const engine = (ctx as unknown as { [ENGINE_OF]?: unknown })[ENGINE_OF];
  if (!(engine instanceof Engine)) throw new InvalidArgumentError('engineOf(ctx): pass the ctx a workflow function received (from a worker of an Engine).');
  return engine;
}

export class Engine {
  readonly clock: Clock;
  /** @internal The size limits in force (workers check outputs against them). */
  readonly limits: Required<Limits>;
  /**
   * Idempotency records: `run(key, fn, { ttl, whileRunning, fingerprint })` runs `fn` once per key
   * across processes and tasks and returns the stored result to repeats (see README, "Exactly-once
   * effects").
   */
  readonly idempotency: Idempotency;
  /** Cron schedules: each tick starts one task, however many workers run (see docs/schedules.md). */
  readonly schedules: Schedules;
  /** The store, batchers, news bus, subscriptions and workers behind the façade (commands/core.ts). */
  readonly #core: cmd.EngineCore;
  readonly #ctx: cmd.CommandContext;

  /**
   * @example
   * const engine = new Engine({ store: 'sqlite:./stepwise.db', workflows: [publish] });
   */
  constructor(options: EngineOptions = {}) {
    const core = (this.#core = new cmd.EngineCore(options, {
      start: (wf, input, o) => this.start(wf, input, o),
      get: (id) => this.get(id, { steps: false, history: false }),
      cancel: (id, o) => this.cancel(id, o),
      engine: this,
    }));
    ({ clock: this.clock, limits: this.limits, idempotency: this.idempotency, schedules: this.schedules, ctx: this.#ctx } = core);
  }

  /** Adds a workflow definition. A second definition with the same name replaces the first. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  register(wf: Workflow<any, any>): this {
    this.#core.register(wf);
    return this;
  }

  /** The registered workflow definitions, by name. */
  get workflows(): ReadonlyMap<string, Workflow> {
    return this.#core.workflows;
  }

  /**
   * Opens the store and applies migrations (done on first use; call it to fail fast). Once open,
   * each call asks the store again (one trivial read with a deadline of two seconds): a closed
   * engine rejects with CLOSED, a store that does not answer with STORE_UNAVAILABLE (health checks
   * rely on it).
   */
  async ready(): Promise<Store> {
    return this.#core.ready();
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
    return new TaskHandle(this, await cmd.startOne(this.#core.starts, workflow, input, options));
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
    return (await cmd.startAll(this.#core.starts, items)).map((r) => new TaskHandle(this, r));
  }

  /** The task with its steps (journal) and history (event log); `{ steps: false, history: false }` reads only the task row. */
  async get(id: string, options: { steps?: boolean; history?: boolean } = {}): Promise<TaskInfo> {
    return cmd.getTask(this.#ctx, id, options);
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
    return cmd.decisions.decideEffect(this.#ctx, taskId, step, decision, options);
  }

  /**
   * @internal Starts (or finds, by `key`) a child task of `parent`: `ctx.startChild` (see
   * `primitives/child.ts`) calls it from inside the parent's start step.
   */
  async startChildTask(
    parent: Pick<TaskRow, 'id' | 'rootId' | 'depth'> & { tags?: string | null; childUsage?: string | null },
    workflow: string | Workflow<unknown, unknown, unknown>,
    input: unknown,
    key: string,
  ): Promise<StartResult> {
    return cmd.startChildTask(this.#core.starts, parent, workflow, input, key);
  }

  /**
   * A new task of the same workflow and version that starts with this task's journal up to
   * `fromStep` (the calls before it, as they were recorded) and runs on its own from there, with
   * this task's input or `input`. The source is not touched; the fork's `forkedFrom` names it.
   * @example
   * const { id } = await engine.fork(taskId, { fromStep: 'draft', input: { topic: 'tides', tone: 'formal' } });
   */
  async fork(id: string, options: ForkOptions = {}): Promise<StartResult> {
    return cmd.forkTask(this.#core.starts, id, options);
  }

  /**
   * The recorded model calls (`stepwise-engine/ai`) the current code would make with another request
   * (prompt, model, tools or settings changed), of one task or of a filter's tasks, found by
   * replaying each without calling the model. Re-run from the first: `retry(id, { fromStep: 'first-drift' })`.
   * @example
   * const { drifted } = await engine.drift({ workflow: 'summary', status: 'succeeded' });
   */
  drift(id: string): Promise<TaskDrift>;
  drift(filter?: DriftFilter): Promise<DriftReport>;
  async drift(target: string | DriftFilter = {}): Promise<TaskDrift | DriftReport> {
    return typeof target === 'string' ? cmd.taskDrift(this.#ctx, target) : cmd.filterDrift(this.#ctx, target);
  }

  /**
   * One command on every task a filter matches: cancel, retry, pause, resume or delete, a page at
   * a time, each checked and logged (with `by`) as the single command is; `dryRun` only counts.
   * Tasks the action does not apply to are skipped, failures reported; neither stops the rest.
   * @example
   * const plan = await engine.bulk({ action: 'cancel', filter: { tags: { tenant: 'acme' }, status: 'waiting' }, dryRun: true });
   * if (plan.acted < 500) await engine.bulk({ action: 'cancel', filter: { tags: { tenant: 'acme' }, status: 'waiting' }, reason: 'tenant offboarded', by: 'ops' });
   */
  async bulk(options: cmd.BulkOptions): Promise<cmd.BulkResult> {
    return cmd.bulk(this, options);
  }

  /**
   * Merges tags into a task's, whatever its status (a null value removes a tag); resolves to its
   * tags after the change. See `StartOptions.tags` for the rules of keys and values.
   */
  async setTags(id: string, tags: Readonly<Record<string, string | null>>): Promise<Record<string, string>> {
    return cmd.setTaskTags(this.#ctx, id, tags);
  }

  /**
   * Tasks, newest first, a page at a time: by status, workflow, parent (`{ parent: id }`: its
   * children), tags, creation time, error code (`failedWith`) or text.
   * @example
   * const { tasks, nextCursor } = await engine.list({ tags: { tenant: 'acme' }, status: 'failed', failedWith: 'RATE_LIMITED' });
   */
  async list(options: ListOptions = {}): Promise<ListResult> {
    return cmd.listTasks(this.#ctx, options);
  }

  /**
   * How many tasks there are now, by status (every status asked for is in the answer, 0 if none),
   * of some workflows, due now, or up to a cap per status.
   * @example
   * const { pending, waiting } = await engine.count({ status: ['pending', 'waiting'], workflow: 'publish-article' });
   */
  async count(options: CountOptions = {}): Promise<Record<TaskStatus, number>> {
    return cmd.countTasks(this.#ctx, options);
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
    return cmd.awaitResult<O>(this.#core.results, id, options);
  }

  /**
   * Cancels a task. A running task becomes `cancelling`, its step's AbortSignal fires in whichever
   * worker holds it, its cleanup runs (`ctx.onCancel` handlers, compensations), and it ends
   * `cancelled` — or `failed` with COMPENSATION_FAILED if the cleanup failed for good. A pending,
   * waiting or paused task with no cleanup to do ends `cancelled` at once. It never resumes.
   */
  async cancel(id: string, options: CommandOptions & { reason?: string } = {}): Promise<TaskSummary> {
    return toSummary(await cmd.cancelTask(this.#ctx, id, options));
  }

  /**
   * Runs a failed task again from the step that failed (or from `fromStep`, forgetting it and every
   * later call); completed steps before it are not re-run, except those its last cleanup undid
   * (docs/failure-handling.md). `deadline` gives the retried task a new deadline; without it, a
   * deadline that has passed is lifted.
   */
  async retry(id: string, options: RetryTaskOptions = {}): Promise<TaskSummary> {
    return toSummary(await cmd.retryTask(this.#ctx, id, options));
  }

  /**
   * Pauses a task: a running one at its next step boundary; a pending or waiting one at once. With
   * `subtree: true`, every live task below it too (its child tasks, theirs, …).
   */
  async pause(id: string, options: MoveOptions = {}): Promise<TaskSummary> {
    return this.#move(id, 'pause', options);
  }

  /** Resumes a paused task (or withdraws a pause request that a running task has not reached); `subtree: true`: its child tasks too. */
  async resume(id: string, options: MoveOptions = {}): Promise<TaskSummary> {
    return this.#move(id, 'resume', options);
  }

  async #move(id: string, event: 'pause' | 'resume', options: MoveOptions): Promise<TaskSummary> {
    const subtree = cmd.wantsSubtree(options);
    const row = await cmd.moveTask(this.#ctx, id, event, options);
    if (subtree) await cmd.moveSubtree(this.#ctx, id, event, options);
    return toSummary(row);
  }

  /**
   * Sends an event to a task; `ctx.waitForEvent(name)` receives it. Events sent before the task
   * waits are kept. With an idempotency key, a repeated send is recorded once.
   * @returns whether this call recorded a new event (false for a repeated key)
   */
  async signal(id: string, name: string, payload?: unknown, options: SignalOptions = {}): Promise<SignalResult> {
    return cmd.sendSignal(this.#ctx, id, name, payload, options);
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
    return cmd.decisions.send(this.#ctx, id, event, payload, options);
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
    return cmd.decisions.decide(this.#ctx, approvalId, options);
  }

  /**
   * The alerts workers raised (`new Engine({ alerts })`), newest first: by kind, workflow or task,
   * paged with `before` (the last id of a page). Kept for `alerts.keep` (30 days by default).
   * @example
   * const recent = await engine.alerts({ kind: 'failure-rate', limit: 20 });
   */
  async alerts(query: AlertsQuery = {}): Promise<AlertInfo[]> {
    return cmd.listAlerts(this.#ctx, query);
  }

  /** Approvals across tasks, oldest first: by status, listed approver (a reviewer's queue), workflow or task. */
  async approvals(query: ApprovalsQuery = {}): Promise<ApprovalInfo[]> {
    return cmd.decisions.approvals(this.#ctx, query);
  }

  /**
   * The event log as it grows, read from the store (so it sees what every process writes): one
   * task's entries (`taskId`, resumable by `after: seq`) or every task's (by `after: cursor`; a
   * task's step results come right before its next entry of its own). It waits for new entries
   * unless `follow: false`; a task's stream ends once the task has succeeded or been cancelled.
   * With `{ taskId, streams: true }` it also carries the task's live stream frames.
   * @example
   * for await (const e of engine.events({ taskId: id })) console.log(e.seq, e.type, e.actor.id);
   */
  events(options: EventsOptions & { taskId: string; streams: true }): AsyncIterable<TaskEvent | StreamEvent>;
  events(options: EventsOptions & { taskId: string }): AsyncIterable<TaskEvent>;
  events(options?: EventsOptions): AsyncIterable<TaskEvent & { cursor?: string }>;
  events(options: EventsOptions = {}): AsyncIterable<(TaskEvent & { cursor?: string }) | StreamEvent> {
    // The settled channel tells a reader elsewhere at once that a task finished.
    return cmd.eventLog(() => this.#core.openListening(), this.#core.bus, options);
  }

  /** Why a task is (not) moving: what it waits for, who holds it, what it may do next. */
  async explain(id: string): Promise<Explanation> {
    return cmd.explainTask(this.#ctx, id);
  }

  /**
   * A worker that runs this engine's workflows. Call `start()` on it.
   * @example
   * const worker = engine.worker({ concurrency: 8 }); await worker.start(); … await worker.stop();
   */
  worker(options: WorkerOptions = {}): Worker {
    return this.#core.worker(options);
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
    checkOptionKeys(options, DELETE_OPTIONS, 'engine.delete()');
    return toSummary(await deleteTask(await this.#core.purgeDeps(), id, cmd.actorOf(options.by)));
  }

  /**
   * Deletes every finished task that ended at least `olderThan` ago (of the given statuses and
   * workflows), each with everything it owns, a thousand per statement; `dryRun` only counts them.
   * For tasks a retention policy does not cover (another engine's workflows, a one-off cleanup).
   * @example
   * await engine.purge({ olderThan: '30d', status: ['succeeded', 'cancelled'] });   // { count, byStatus, dryRun }
   */
  async purge(options: PurgeOptions & CommandOptions): Promise<PurgeResult> {
    checkOptionKeys(options, PURGE_OPTIONS, 'engine.purge()');
    return purgeTasks(await this.#core.purgeDeps(), options, cmd.actorOf(options?.by));
  }

  /** Stops this engine's workers (gracefully) and closes the store. */
  async close(): Promise<void> {
    await this.#core.close();
  }
}
