/**
 * @module replay/process-store
 * The store as one worker process sees it: a Proxy over a real store that counts the writes
 * carrying a task's durable state and makes the process die at a chosen one. `checkResume`
 * (testing/) crashes a worker at each write with it; a replay (replay/replay-task.ts) stops at
 * the first write, before it reaches the database.
 *
 * Counted, in the order the process makes them: `writeBatch` / `writeBatchNow` (checkpoints and
 * end-of-run transitions, through the worker's group commit), `transition` fenced by a run's
 * epoch, `insertApproval`, `updateApproval` fenced by a run's epoch, `appendRunEvents` (model
 * usage), `runInTransaction` (a transactional step and its checkpoint) and the idempotency records'
 * `acquire`, `complete` and `fail` (business keys, at-most-once intents). Claims, heartbeats,
 * progress, stream chunks and the background scanners' writes are not crash points: they carry no
 * result, and their number depends on timing.
 *
 * At the chosen write the process dies: `before`, the write never reaches the database (the step
 * whose result it carries ran; its checkpoint is lost; a transactional step's function, which runs
 * inside its write, does not run: what it wrote would have rolled back with it); `after`, it
 * commits and its answer never comes back. `onDeath` is called at that instant, synchronously.
 * From then on every call, read or write, returns a promise that never settles, as a dead process
 * hears nothing (its subscriptions end); `writeBatchNow`, being synchronous, throws instead, and its caller's retry goes to
 * `writeBatch`, which never settles. Nothing the process asks for after its death reaches the database.
 */
import { RESERVED_SIGNAL_PREFIX } from '../approvals/policy.ts';
import type { IdempotencyBackend } from '../idempotency/records.ts';
import type { StepRow, Store, TransactionCheckpoint, TransitionWrite, WriteOp } from '../store.ts';

/** Where a process dies: before or after its `write`-th counted write (1-based). */
export interface CrashPlan {
  write: number;
  when: 'before' | 'after';
}

/** One counted write, as the report shows it. */
export interface WriteInfo {
  /** 1, 2, … in the order the process made them (across all of the task's runs in that process). */
  index: number;
  /** What it writes, for people: `the result of step "draft"`, `the complete transition with the result of step "publish"`. */
  what: string;
  /** The steps whose results (completed or failed) it makes durable. */
  results: string[];
}

type Described = Omit<WriteInfo, 'index'>;

/** A promise that never settles: what a dead process gets. A fresh one per call, so that what waits on it can be collected. */
function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

class ProcessDiedError extends Error {
  constructor() {
    super('The worker process is dead (checkResume crash simulation): nothing it writes reaches the database.');
    this.name = 'ProcessDiedError';
  }
}

function rowWhat(r: StepRow): string {
  const approval = r.kind === 'event' && r.name.startsWith(RESERVED_SIGNAL_PREFIX) ? r.name.slice(RESERVED_SIGNAL_PREFIX.length) : null;
  const call = approval !== null ? `approval "${approval}"` : r.kind === 'step' ? `step "${r.name}"` : r.kind === 'sleep' ? `sleep "${r.name}"` : `event wait "${r.name}"`;
  switch (r.status) {
    case 'completed':
      return r.kind === 'step' ? `the result of ${call}` : r.kind === 'sleep' ? `the end of ${call}` : approval !== null ? `the decision of ${call}` : `the event received by ${call}`;
    case 'failed':
      return `the failure of ${call}`;
    case 'retrying':
      return r.output?.startsWith('{"rateLimit"') ? `the rate-limit reservation of ${call}` : `failed attempt ${r.attempts} of ${call}`;
    case 'waiting':
      return `the start of ${call}`;
  }
}

function resultsOf(rows: readonly StepRow[]): string[] {
  return rows.filter((r) => r.kind === 'step' && (r.status === 'completed' || r.status === 'failed')).map((r) => r.name);
}

function describeOp(op: WriteOp): Described {
  if (op.kind === 'step') return { what: rowWhat(op.step), results: resultsOf([op.step]) };
  return describeTransition(op);
}

function describeTransition(t: TransitionWrite): Described {
  const rows = t.steps ?? [];
  return { what: `the ${t.event} transition${rows.length ? ` with ${rows.map(rowWhat).join(', ')}` : ''}`, results: resultsOf(rows) };
}

function joined(parts: readonly Described[]): Described {
  return { what: parts.map((p) => p.what).join('; '), results: parts.flatMap((p) => p.results) };
}

/** How each counted method describes its arguments; `null`: this call is not counted. */
const COUNTED: Partial<Record<keyof Store, (args: unknown[]) => Described | null>> = {
  writeBatch: (args) => joined((args[0] as WriteOp[]).map(describeOp)),
  writeBatchNow: (args) => joined((args[0] as WriteOp[]).map(describeOp)),
  transition: (args) => ('epoch' in (args[0] as TransitionWrite).guard ? describeTransition(args[0] as TransitionWrite) : null),
  insertApproval: (args) => ({ what: `the request of approval "${(args[0] as { approval: { name: string } }).approval.name}"`, results: [] }),
  updateApproval: (args) => ((args[0] as { epoch?: number }).epoch === undefined ? null : { what: `a change of approval ${(args[0] as { id: string }).id}`, results: [] }),
  appendRunEvents: () => ({ what: 'the model usage of a run', results: [] }),
  runInTransaction: () => ({ what: 'a transactional step (ctx.transaction) with its checkpoint', results: [] }),
};

const COUNTED_RECORDS: Partial<Record<keyof IdempotencyBackend, (args: unknown[]) => Described>> = {
  acquire: (args) => ({ what: `taking idempotency record "${(args[0] as { key: string }).key}"`, results: [] }),
  complete: (args) => ({ what: `completing idempotency record "${args[0] as string}"`, results: [] }),
  fail: (args) => ({ what: `failing idempotency record "${args[0] as string}"`, results: [] }),
};

/**
 * One worker process's view of a store. `store` is what its engine is given; `writes` lists the
 * counted writes it made; `dead` tells whether it has died (at `plan`, if given).
 */
export class ProcessStore {
  readonly store: Store;
  readonly writes: WriteInfo[] = [];
  /** The arguments of the write the process died at (what it would have written), or null. */
  deathArgs: readonly unknown[] | null = null;
  readonly #plan: CrashPlan | null;
  readonly #onDeath: (write: WriteInfo | null) => void;
  #dead = false;
  #records: IdempotencyBackend | null = null;
  /** The process's subscriptions to other processes' news, ended at its death. */
  readonly #subscriptions: Array<() => Promise<void>> = [];
  /** Calls made before the death that the database has not answered yet. */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(real: Store, plan: CrashPlan | null, onDeath: (write: WriteInfo | null) => void) {
    this.#plan = plan;
    this.#onDeath = onDeath;
    this.store = new Proxy(real, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        if (prop === 'subscribe') {
          // What the process hears from other processes stops with it, as its connection would.
          return (listener: (e: unknown) => void, topic?: unknown) =>
            (this.#call(() => method.call(target, (e: unknown) => void (this.#dead || listener(e)), topic), null, false) as Promise<(() => Promise<void>) | null>).then((off) => {
              if (off) this.#subscriptions.push(off);
              return off;
            });
        }
        if (prop === 'idempotencyRecords') {
          return () => (this.#records ??= this.#wrapRecords(method.call(target) as IdempotencyBackend));
        }
        const describe = COUNTED[prop as keyof Store];
        if (prop === 'runInTransaction') {
          return (fn: unknown, checkpoint: (value: unknown) => TransactionCheckpoint | Promise<TransactionCheckpoint>) => {
            let name: string | null = null;
            const named = async (value: unknown): Promise<TransactionCheckpoint> => {
              const cp = await checkpoint(value);
              name = cp.write.step.name;
              return cp;
            };
            return this.#call(
              () => method.call(target, fn, named),
              { what: 'a transactional step (ctx.transaction) with its checkpoint', results: [] },
              false,
              () => name,
            );
          };
        }
        return (...args: unknown[]) => this.#call(() => method.apply(target, args), describe ? describe(args) : null, prop === 'writeBatchNow', undefined, args);
      },
    });
  }

  get dead(): boolean {
    return this.#dead;
  }

  /**
   * Resolves once every call the process made before its death has been answered by the database.
   * A statement a process sent before it died may still commit after (its heartbeat renewing a
   * lease, on PostgreSQL): whoever takes its tasks over waits for that first.
   */
  async settled(): Promise<void> {
    while (this.#inFlight.size) await Promise.allSettled([...this.#inFlight]);
  }

  /** A call that reaches the database, tracked until it is answered. */
  #reach(run: () => unknown): unknown {
    const result = run();
    if (!(result instanceof Promise)) return result;
    this.#inFlight.add(result);
    const done = (): void => void this.#inFlight.delete(result);
    result.then(done, done);
    return result;
  }

  #wrapRecords(real: IdempotencyBackend): IdempotencyBackend {
    return new Proxy(real, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        const describe = COUNTED_RECORDS[prop as keyof IdempotencyBackend];
        return (...args: unknown[]) => this.#call(() => method.apply(target, args), describe ? describe(args) : null, false);
      },
    });
  }

  /** The process dies now, at no write of its own (`checkReplay` stops a replay this way). */
  die(): void {
    this.#die(null);
  }

  #die(write: WriteInfo | null): void {
    if (this.#dead) return;
    this.#dead = true;
    for (const off of this.#subscriptions.splice(0)) void off().catch(() => undefined);
    this.#onDeath(write);
  }

  /**
   * One call of the process. Uncounted calls pass through while it lives; a counted one takes the
   * next index and, at the plan's, kills the process before or after reaching the database.
   * `named` gives a transactional step's name once its checkpoint was built (after the call).
   */
  #call(call: () => unknown, described: Described | null, sync: boolean, named?: () => string | null, args: readonly unknown[] = []): unknown {
    const run = (): unknown => this.#reach(call);
    if (this.#dead) {
      if (sync) throw new ProcessDiedError();
      return never();
    }
    if (!described) return run();
    const write: WriteInfo = { index: this.writes.length + 1, ...described };
    this.writes.push(write);
    const name = (): void => {
      const step = named?.();
      if (step) Object.assign(write, { what: `the transaction of step "${step}" with its checkpoint`, results: [step] });
    };
    const plan = this.#plan;
    if (plan?.write === write.index) this.deathArgs = args;
    if (!plan || plan.write !== write.index) {
      if (!named) return run();
      return (run() as Promise<unknown>).then((v) => {
        name();
        return v;
      });
    }
    if (plan.when === 'before') {
      this.#die(write);
      if (sync) throw new ProcessDiedError();
      return never();
    }
    if (sync) {
      try {
        run();
      } finally {
        this.#die(write);
      }
      throw new ProcessDiedError();
    }
    const dies = (): Promise<never> => {
      name();
      this.#die(write);
      return never();
    };
    let written: Promise<unknown>;
    try {
      written = Promise.resolve(run());
    } catch (e) {
      written = Promise.reject(e);
    }
    return written.then(dies, dies);
  }
}
