/**
 * @module testing/trial
 * One run of a workflow for `checkResume`: a task on a fresh database, a worker process that may
 * die at a chosen write (see `replay/process-store.ts`), a second worker process that then takes
 * the task over, and "the world" (`world.ts`) that drives the task to its end.
 *
 * A process is an engine and a worker of their own, on a store instance of their own, as another
 * process on the same database would be. The dead one is abandoned on the spot (`Worker.abandon`:
 * timers cleared, nothing written, leases left behind); its clock and observers go silent with it.
 * Its leases are then ended through the store (`endLeasesOf`), as a worker starting on the same
 * host does for a dead process, so that the second worker reclaims the task at once instead of
 * waiting for the lease to expire.
 */
import { Engine } from '../engine.ts';
import { isFinished } from '../lifecycle.ts';
import type { Limits } from '../limits.ts';
import type { RateLimits } from '../api/rate-limits.ts';
import type { Observer } from '../observers.ts';
import type { Store } from '../store.ts';
import { openStore } from '../store-url.ts';
import type { Worker } from '../worker.ts';
import type { Workflow, WorkflowContext } from '../workflow.ts';
import { ProcessStore, type CrashPlan, type WriteInfo } from '../replay/process-store.ts';
import type { ManualClock } from '../manual-clock.ts';
import { SIMULATED_WORKER, processClock } from '../replay/process-clock.ts';
import { World, type WorldAnswers } from './world.ts';
import { withResolvers } from '../resolvers.ts';

/** One attempt of a step, with the key it received. */
export interface StepAttempt {
  step: string;
  attempt: number;
  idempotencyKey: string;
}

/** How a task ended. Error messages are compared with the task's id replaced by `<taskId>`. */
export type TaskOutcome = { status: 'succeeded'; output: unknown } | { status: 'failed'; error: { name: string; code: string | null; message: string } } | { status: 'cancelled' };

/** One call of the task's journal: its position, id, kind and final status. */
export interface JournalCall {
  seq: number;
  step: string;
  kind: string;
  status: string;
}

export interface TrialSettings {
  workflow: Workflow;
  input: unknown;
  /** A fresh database's store URL (migrated or not), used by this run only. */
  database: string;
  /** The clock of this run (the check advances it). */
  clock: ManualClock;
  answers: WorldAnswers;
  observers: readonly Observer[];
  limits: Limits | undefined;
  rateLimits?: RateLimits | undefined;
  /** Real time the run may take before it counts as not finished. */
  timeoutMs: number;
}

export type TrialEnd = { finished: true; outcome: TaskOutcome; calls: JournalCall[] } | { finished: false; why: string };

export interface TrialResult {
  taskId: string;
  /** The counted writes of the first worker process, up to its death. */
  writes: WriteInfo[];
  /** The write at which it died, or null: the task finished first. */
  death: WriteInfo | null;
  /** Steps whose results were durable when it died. */
  durable: string[];
  /** Attempts the first process started (before its death). */
  first: StepAttempt[];
  /** Attempts the second process started. */
  second: StepAttempt[];
  end: TrialEnd;
}

interface Process {
  readonly dead: boolean;
  /** Step functions (and forEach items) of this process still running: a dead process's go on until they return. */
  running: Set<Promise<unknown>>;
  view: ProcessStore;
  worker: Worker;
  attempts: StepAttempt[];
  /** Resolves when the process dies. */
  died: Promise<void>;
  close(): Promise<void>;
}

/** Waits for `p`, at most `ms`; the timer is cleared either way (a pending one would keep the process alive). */
async function atMost(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Observers that hear nothing from a dead process. */
function processObservers(observers: readonly Observer[], alive: () => boolean): Observer[] {
  return observers.map(
    (o) =>
      new Proxy(o, {
        get(target, prop) {
          const value: unknown = Reflect.get(target, prop, target);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => (alive() ? (value as (...a: unknown[]) => unknown).apply(target, args) : undefined);
        },
      }),
  );
}

/** `fn` with the promise of each of its calls kept in `running` until it settles. */
function tracked<A extends unknown[], R>(fn: (...args: A) => R, running: Set<Promise<unknown>>): (...args: A) => R {
  if (typeof fn !== 'function') return fn;
  return (...args: A): R => {
    const result = fn(...args);
    if (result !== null && typeof (result as { then?: unknown })?.then === 'function') {
      const p = Promise.resolve(result).then(
        () => undefined,
        () => undefined,
      );
      running.add(p);
      void p.then(() => running.delete(p));
    }
    return result;
  };
}

/**
 * `wf` whose context hands the step functions it is given (`ctx.step`, `ctx.transaction`,
 * `ctx.forEach` items, and so the model and tool calls of `stepwise-engine/ai`, which go through
 * `ctx.step`) to `running` as they run: what a dead process's steps still do lands in the outside
 * world after its death, and the check waits for it before it reads `effects()`.
 */
function trackedWorkflow(wf: Workflow, running: Set<Promise<unknown>>): Workflow {
  // The context is frozen (a Proxy could not hand back other methods): an object inheriting from
  // it, with its own step, transaction and forEach, which call the context's own.
  const wrap = (ctx: WorkflowContext): WorkflowContext =>
    Object.freeze(
      Object.create(ctx, {
        step: { value: ((name, fn, options) => ctx.step(name, tracked(fn, running), options)) satisfies WorkflowContext['step'] },
        transaction: { value: ((name, fn, options) => ctx.transaction(name, tracked(fn, running), options)) satisfies WorkflowContext['transaction'] },
        forEach: { value: ((name, items, fn, options) => ctx.forEach(name, items, tracked(fn, running), options)) satisfies WorkflowContext['forEach'] },
      }) as WorkflowContext,
    );
  return Object.freeze({ ...wf, fn: (ctx: WorkflowContext, input: unknown) => wf.fn(wrap(ctx), input) });
}

async function startProcess(s: TrialSettings, url: string, plan: CrashPlan | null, workerId: string): Promise<Process> {
  const real: Store = await openStore(url);
  let worker: Worker | null = null;
  const { promise: dead, resolve: died } = withResolvers<void>();
  const view = new ProcessStore(real, plan, () => {
    worker?.abandon();
    died();
  });
  const alive = (): boolean => !view.dead;
  const running = new Set<Promise<unknown>>();
  const engine = new Engine({
    store: view.store,
    workflows: [trackedWorkflow(s.workflow, running)],
    clock: processClock(s.clock, alive),
    observers: processObservers(s.observers, alive),
    ...(s.limits ? { limits: s.limits } : {}),
    ...(s.rateLimits ? { rateLimits: s.rateLimits } : {}),
  });
  const w = engine.worker({ ...SIMULATED_WORKER, workerId });
  worker = w;
  const attempts: StepAttempt[] = [];
  w.on('step:started', (e) => {
    if (alive()) attempts.push({ step: e.step, attempt: e.attempt, idempotencyKey: e.idempotencyKey });
  });
  try {
    await w.start();
  } catch (e) {
    await real.close().catch(() => undefined);
    throw e;
  }
  return {
    get dead() {
      return view.dead;
    },
    view,
    running,
    worker: w,
    attempts,
    died: dead,
    async close() {
      // A dead process is not stopped (it would write): its store is closed under it.
      if (!view.dead) await engine.close();
      await real.close();
    },
  };
}

/** Runs the task once; with `plan`, the first worker dies at that write and a second one finishes the task. */
export async function runTrial(s: TrialSettings, plan: CrashPlan | null): Promise<TrialResult> {
  const url = s.database;
  const deadline = Date.now() + s.timeoutMs;
  const client = new Engine({ store: url, workflows: [s.workflow], clock: s.clock, ...(s.limits ? { limits: s.limits } : {}) });
  const processes: Process[] = [];
  try {
    const clientStore = await client.ready();
    const first = await startProcess(s, url, plan, 'check-first-worker');
    processes.push(first);
    const { id } = await client.start(s.workflow, s.input);
    const world = new World(client, clientStore, id, s.clock, s.answers);
    let driven = await world.drive(deadline, first);
    let durable: string[] = [];
    let second: Process | null = null;
    if (first.dead) {
      // What it sent before dying may still land (a batch in flight; a heartbeat that renews its
      // lease): the next worker comes once it has.
      await atMost(first.view.settled(), Math.max(0, deadline - Date.now()));
      // What the dead process left durable, read as the next worker will find it.
      durable = (await clientStore.getSteps(id)).filter((r) => r.kind === 'step' && (r.status === 'completed' || r.status === 'failed') && r.done !== null).map((r) => r.name);
      await clientStore.endLeasesOf(first.worker.id, s.clock.now());
      second = await startProcess(s, url, null, 'check-second-worker');
      processes.push(second);
      driven = await world.drive(deadline, null);
    }
    // The dead process's step functions that were running when it died go on (a process dies
    // between two of its writes, not in the middle of an HTTP call the tests' fakes stand for):
    // what they do must be in the outside world before effects() reads it, and not leak into
    // the next run's.
    if (first.dead) await atMost(settledAll(first.running), Math.max(0, deadline - Date.now()));
    const death = first.dead ? (first.view.writes[first.view.writes.length - 1] as WriteInfo) : null;
    const end: TrialEnd = driven === 'finished' ? { finished: true, ...(await finalState(client, id)) } : { finished: false, why: driven === 'died' ? 'its worker died' : driven.why };
    return { taskId: id, writes: [...first.view.writes], death, durable, first: first.attempts, second: second?.attempts ?? [], end };
  } finally {
    for (const p of processes.reverse()) await p.close().catch(() => undefined);
    await client.close().catch(() => undefined);
  }
}

/** Resolves once `running` is empty (a settling step may start no other: its process is dead). */
async function settledAll(running: Set<Promise<unknown>>): Promise<void> {
  while (running.size) await Promise.all([...running]);
}

async function finalState(client: Engine, id: string): Promise<{ outcome: TaskOutcome; calls: JournalCall[] }> {
  const info = await client.get(id, { history: false });
  const calls = info.steps.map((r) => ({ seq: r.seq, step: r.name, kind: r.kind, status: r.status }));
  if (info.status === 'succeeded') return { outcome: { status: 'succeeded', output: info.output }, calls };
  if (info.status === 'failed') {
    const e = info.error;
    return { outcome: { status: 'failed', error: { name: e.name, code: e.code ?? null, message: e.message } }, calls };
  }
  if (!isFinished(info.status)) throw new Error(`task ${id} is ${info.status}, not finished`);
  return { outcome: { status: 'cancelled' }, calls };
}
