/**
 * @module primitives/child
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.startChild(workflow, input, options)` and `ctx.child(…)`: child tasks, built on two durable
 * calls of the parent and nothing new in the kernel.
 *
 * - The start is a step (`child:<workflow>` unless named) whose function starts the child with an
 *   idempotency key derived from the step's own (`child:v1:<parent>:<step>#<n>`, `:retry<n>` after
 *   the parent's n-th retry): a crash between the child's creation and the step's checkpoint finds
 *   the same child on the next run.
 * - The wait for its end is an event wait on `child:<id>`: the child's last transition records that
 *   signal to the parent in the same transaction (see `TransitionWrite.parentSignal`), with the
 *   child's status, output and error as its payload, and makes the parent due. Until then the
 *   parent parks (no worker slot held).
 * - A cancel of the parent cancels its live children (found in the store by `parent_id`, so
 *   children started by earlier runs too) from an `onCancel` handler registered with the first
 *   child, and waits for their ends: the parent ends after its children's cleanup.
 * - When the parent's code returns or throws with children still running, those started with
 *   `onParentEnd: 'cancel'` (the default) are cancelled and waited for before the parent ends.
 *   The start's recorded output names the option (`{ id, workflow, onParentEnd }`), so a run whose
 *   code did not reach a start again (it threw first, or changed) still knows what that child asked for.
 */
import { tagsOf } from './tags.ts';
import { ChildFailedError, InvalidArgumentError, StepFailedError, coerceError, isStepwiseError } from '../errors.ts';
import { CHILD_TASKS } from '../errors/task.ts';
import { isFinished, type TaskStatus } from '../lifecycle.ts';
import { decodeJson, type SerializedError } from '../serialize.ts';
import type { ChildHandle, ChildOptions } from '../api/child.ts';
import type { Workflow } from '../workflow.ts';
import type { Run } from '../run/run.ts';
import type { StepRow } from '../store.ts';
import type { CancelHandler } from '../run/cleanup-scope.ts';
import { haltOf } from '../run/state.ts';
import { childEndSignal } from '../transitions.ts';
import { step } from './step.ts';
import { faultPoint } from '../fault-points.ts';
import { KEY_MAX } from '../text-rules.ts';
import { hashKey } from '../idempotency/keys.ts';
import { waitForEvent } from './wait-for-event.ts';
import { parseSummary } from '../ai/metering/usage.ts';
import { childStartUsage } from '../ai/metering/subtree-budget.ts';

/** What the primitive needs of the Engine the run works for (the Engine, seen from below). */
export interface ChildHost {
  startChildTask(
    parent: Pick<Run['task'], 'id' | 'rootId' | 'depth'> & { tags: string | null; childUsage: string | null },
    workflow: string | Workflow<unknown, unknown, unknown>,
    input: unknown,
    key: string,
  ): Promise<{ id: string; workflow: string }>;
  list(options: { parent: string; status: TaskStatus[]; limit: number }): Promise<{ tasks: Array<{ id: string; status: TaskStatus }> }>;
  cancel(id: string, options: { reason: string; by: { kind: 'system'; id: string } }): Promise<unknown>;
  result(id: string): Promise<unknown>;
}

/** The children one run of a parent started (or found again on replay), by id. */
interface RunChildren {
  readonly onParentEnd: Map<string, 'cancel' | 'abandon'>;
  /** Those whose end the parent received (`result()`): ended for sure. */
  readonly ended: Set<string>;
  /** The run's handler that ends them on a cancel, or on a failure for good in the cleanup. */
  readonly handler: CancelHandler;
}

const CHILDREN = new WeakMap<Run, RunChildren>();
const LIVE: TaskStatus[] = ['pending', 'running', 'waiting', 'paused', 'cancelling'];
const ON_PARENT_END = ['cancel', 'abandon'];
const OPTION_KEYS = new Set(['name', 'onParentEnd']);
/** Errors of a start that another attempt cannot fix: the parent's call fails with them at once. */
const REFUSALS = new Set(['WORKFLOW_NOT_FOUND', 'INVALID_INPUT', 'INVALID_ARGUMENT', 'NOT_SERIALIZABLE', 'PAYLOAD_TOO_LARGE', 'IDEMPOTENCY_CONFLICT', 'CHILD_DEPTH_EXCEEDED']);

function hostOf(run: Run, engine: object | undefined): ChildHost {
  if (!engine || typeof (engine as Partial<ChildHost>).startChildTask !== 'function') {
    throw run.fail(new InvalidArgumentError('ctx.startChild(): child tasks need the Engine the task runs under (a worker of an Engine).'));
  }
  return engine as ChildHost;
}

function checkOptions(run: Run, workflowName: string, options: ChildOptions): void {
  const where = `ctx.startChild(${JSON.stringify(workflowName)})`;
  if (typeof options !== 'object' || options === null) throw run.fail(new InvalidArgumentError(`${where}: options must be an object { name, onParentEnd }.`));
  const unknown = Object.keys(options).find((k) => !OPTION_KEYS.has(k));
  if (unknown) throw run.fail(new InvalidArgumentError(`${where}: unknown option "${unknown}" (known: name, onParentEnd).`));
  if (options.onParentEnd !== undefined && !ON_PARENT_END.includes(options.onParentEnd)) {
    throw run.fail(new InvalidArgumentError(`${where}: onParentEnd must be 'cancel' or 'abandon', got ${JSON.stringify(options.onParentEnd)}.`));
  }
}

/** The run's children, made (with the cancel handler that cascades) at its first child. */
function childrenOf(run: Run, host: ChildHost): RunChildren {
  let children = CHILDREN.get(run);
  if (!children) {
    // A cancel ends every child; a failure for good those the code's end would cancel (see
    // settleChildren), in the run's cleanup: also when the code was not waited for (a run failed
    // from outside or past its deadline ends once it is quiet, whatever its code still does).
    const handler: CancelHandler = {
      fn: ({ reason }) => endChildren(host, run.taskId, () => true, `its parent task ${run.taskId} was cancelled${reason ? `: ${reason}` : ''}`),
      onFailure: () => endChildren(host, run.taskId, cancelOnEnd(run), `its parent task ${run.taskId} ended`),
      failureLabel: CHILD_TASKS,
    };
    children = { onParentEnd: new Map(), ended: new Set(), handler };
    CHILDREN.set(run, children);
    run.registerCancelHandler(handler);
  }
  return children;
}

export async function startChild(
  run: Run,
  engine: object | undefined,
  workflow: string | Workflow<unknown, unknown, unknown>,
  input: unknown,
  options: ChildOptions = {},
): Promise<ChildHandle> {
  const host = hostOf(run, engine);
  const workflowName = typeof workflow === 'string' ? workflow : workflow?.name;
  if (typeof workflowName !== 'string') throw run.fail(new InvalidArgumentError('ctx.startChild(): the first argument must be a workflow definition or name.'));
  checkOptions(run, workflowName, options);
  const children = childrenOf(run, host);
  let started: { id: string; workflow: string };
  try {
    started = await step(run, options.name ?? `child:${workflowName}`, async ({ idempotencyKey }) => {
      // A retry of the parent that runs this call again (`fromStep`) starts a new child: the old one
      // ended, and its end was received. Within one retry, every run finds the same child.
      const generation = run.task.retries ? `:retry${run.task.retries}` : '';
      const key = `child:${idempotencyKey}${generation}`;
      // A long step name makes a key past the limit: digested then (the same on every run).
      // The child learns the subtree budgets above it (see ai/metering/subtree-budget.ts).
      const budget = parseSummary(run.task.usage).budget ?? run.workflow.options.budget;
      const { id, rootId, depth } = run.task;
      const parent = { id, rootId, depth, tags: tagsOf(run), childUsage: childStartUsage(run.task, budget) };
      const answer = await host.startChildTask(parent, workflow, input, key.length > KEY_MAX ? `child:${hashKey(key)}` : key);
      faultPoint('child:created'); // the child exists; the parent's checkpoint of its start does not
      return { id: answer.id, workflow: answer.workflow, onParentEnd: options.onParentEnd ?? 'cancel' };
    });
  } catch (e) {
    // A start the engine refused (an unknown workflow, a bad input, too deep): its own coded error.
    if (e instanceof StepFailedError && isStepwiseError(e.cause) && REFUSALS.has(e.cause.code)) throw e.cause;
    throw e;
  }
  children.onParentEnd.set(started.id, options.onParentEnd ?? 'cancel');
  let result: Promise<unknown> | undefined;
  return Object.freeze({
    id: started.id,
    workflow: started.workflow,
    result: () => (result ??= awaitChild(run, started)),
  });
}

/** The child's output, or ChildFailedError: the end it signalled, as the parent's journal recorded it. */
async function awaitChild(run: Run, child: { id: string; workflow: string }): Promise<unknown> {
  const got = await waitForEvent<{ status: TaskStatus; output: unknown; error: SerializedError | null }>(run, childEndSignal(child.id));
  const end = (got.timedOut ? null : got.payload) ?? { status: 'failed' as const, output: null, error: null };
  if (!got.timedOut) CHILDREN.get(run)?.ended.add(child.id);
  if (end.status === 'succeeded') return end.output;
  const status = end.status === 'cancelled' ? 'cancelled' : 'failed';
  const error = end.error;
  const code = error?.code ?? (status === 'cancelled' ? 'TASK_CANCELLED' : null);
  const message = error?.message ?? (status === 'cancelled' ? 'cancelled' : 'failed');
  throw new ChildFailedError({ id: child.id, workflow: child.workflow, status, code, message }, error ?? undefined);
}

export async function child(run: Run, engine: object | undefined, workflow: string | Workflow<unknown, unknown, unknown>, input: unknown, options?: ChildOptions): Promise<unknown> {
  return (await startChild(run, engine, workflow, input, options)).result();
}

/** The intrinsic `then` (see {@link withChildren}). */
const PROMISE_THEN = Promise.prototype.then;

/**
 * Runs the workflow's code; when it has returned or thrown (not halted), children still running
 * that were started with `onParentEnd: 'cancel'` are cancelled, and their ends waited for, before
 * the run goes on to end the task.
 */
export function withChildren(run: Run, engine: object | undefined, code: (run: Run) => Promise<unknown>): Promise<unknown> {
  let running: Promise<unknown>;
  try {
    running = Promise.resolve(code(run));
  } catch (e) {
    running = Promise.reject(e);
  }
  // Functions of the module bound to this run, not an async frame per run (see resolvers.ts). The
  // intrinsic `then`, as `await` uses: a promise whose own `then` was replaced does not get called.
  return PROMISE_THEN.call(running, codeReturned.bind(null, run, engine), codeThrew.bind(null, run, engine)) as Promise<unknown>;
}

function codeReturned(run: Run, engine: object | undefined, value: unknown): unknown {
  const settled = settleChildren(run, engine, true);
  return settled === SETTLED ? value : settled.then(() => value);
}

function codeThrew(run: Run, engine: object | undefined, error: unknown): Promise<never> {
  // Once the code has ended its children, the cleanup of a run failed for good has nothing to
  // do for them (should this fail, the cleanup ends them).
  return settleChildren(run, engine, false).then(
    () => {
      withdrawFailureHandler(run);
      throw error;
    },
    () => {
      throw error;
    },
  );
}

/** The code has ended the run's children: the cleanup of a run failed for good leaves them be. */
function withdrawFailureHandler(run: Run): void {
  const children = CHILDREN.get(run);
  if (children) children.handler.onFailure = undefined;
}

/**
 * `returned`: the code returned. Code that threw may have stopped before some of its starts (a
 * branch of a `Promise.all` that rejected while another's start was still on its way; a run failed
 * from outside part way through its replay), and code that changed between runs may return
 * without reaching them: the starts its journal records (see {@link recordedChildren}) are
 * settled too, each as it asked. When the run knows every recorded start and every child it would
 * cancel has ended, nothing is looked up.
 */
function settleChildren(run: Run, engine: object | undefined, returned: boolean): Promise<void> {
  // Most runs start no child: answered at once, settled (as an async function that returned).
  if (haltOf(run.state) !== null || !engine) return SETTLED;
  const children = CHILDREN.get(run);
  if (!children && !recordsStart(run)) return SETTLED;
  return settleStarted(run, engine, returned, children);
}

const SETTLED: Promise<void> = Promise.resolve();

/** Whether the run's journal may record a child's start. */
function recordsStart(run: Run): boolean {
  for (const row of run.recordedRows()) if (mayRecordStart(row)) return true;
  return false;
}

/** Whether `row` may be a child's start: a completed step whose output names `onParentEnd`. */
function mayRecordStart(row: StepRow): row is StepRow & { output: string } {
  return row.kind === 'step' && row.status === 'completed' && row.output?.includes('"onParentEnd"') === true;
}

/** {@link settleChildren} of a run that started children, or whose journal records starts. */
async function settleStarted(run: Run, engine: object, returned: boolean, children: RunChildren | undefined): Promise<void> {
  const recorded = recordedChildren(run);
  if (!children && !recorded.size) return;
  const cancel = cancelOnEnd(run, children, recorded);
  // Every start known to this run, and every child it would cancel ended (the parent received each end).
  const settled = children && [...recorded.keys()].every((id) => children.onParentEnd.has(id)) && [...children.onParentEnd.keys()].every((id) => !cancel(id) || children.ended.has(id));
  if (returned && settled) return;
  // (Should the run take itself to be idle meanwhile, because the code left a wait registered, it
  // parks on that wait; its next run returns here again and finds the children ended.)
  await endChildren(engine as ChildHost, run.taskId, cancel, `its parent task ${run.taskId} ended`);
}

/** Which of the run's children its end cancels: all but those started with `onParentEnd: 'abandon'`. */
function cancelOnEnd(run: Run, children = CHILDREN.get(run), recorded = recordedChildren(run)): (id: string) => boolean {
  return (id) => (children?.onParentEnd.get(id) ?? recorded.get(id)) !== 'abandon';
}

/**
 * The children whose start the run's journal records, by id, with the `onParentEnd` each asked
 * for. (Starts recorded before the output named the option are not found: such a child counts as
 * `cancel`, the default, as any child the run does not know.)
 */
function recordedChildren(run: Run): Map<string, 'cancel' | 'abandon'> {
  const out = new Map<string, 'cancel' | 'abandon'>();
  for (const row of run.recordedRows()) {
    if (!mayRecordStart(row)) continue;
    let v: { id?: unknown; workflow?: unknown; onParentEnd?: unknown } | null;
    try {
      v = decodeJson(row.output) as typeof v;
    } catch {
      continue; // not a start's output (a step's own value that does not decode here)
    }
    if (typeof v?.id === 'string' && typeof v.workflow === 'string' && (v.onParentEnd === 'cancel' || v.onParentEnd === 'abandon')) out.set(v.id, v.onParentEnd);
  }
  return out;
}

/**
 * Cancels the live children of `parentId` that `select` picks, and waits until none is left: each
 * cancel reaches the child's own children the same way (its cleanup cancels them).
 */
async function endChildren(host: ChildHost, parentId: string, select: (id: string) => boolean, reason: string): Promise<void> {
  const by = { kind: 'system' as const, id: `task:${parentId}` };
  for (;;) {
    const { tasks } = await host.list({ parent: parentId, status: LIVE, limit: 1000 });
    const live = tasks.filter((t) => select(t.id) && !isFinished(t.status));
    if (!live.length) return;
    await Promise.all(
      live.map(async (t) => {
        if (t.status !== 'cancelling') await host.cancel(t.id, { reason, by }).catch((e: unknown) => ignoreEnded(e));
        await host.result(t.id).catch(() => undefined);
      }),
    );
  }
}

/** A child that ended between the listing and its cancel is no error. */
function ignoreEnded(e: unknown): void {
  if (isStepwiseError(e, 'ILLEGAL_TRANSITION') || isStepwiseError(e, 'TASK_NOT_FOUND')) return;
  throw coerceError(e);
}
