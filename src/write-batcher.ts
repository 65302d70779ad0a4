/**
 * @module write-batcher
 * Internal: not part of the public API (the package exports only its index modules).
 * Group commit for one worker: checkpoints and end-of-run transitions requested while a batch is
 * being written (or within the same tick) are committed together in one database transaction, so
 * concurrent tasks share one durable write. Each op keeps its own fence: one op refused does not
 * affect the others. A failed batch (database unreachable, lock timeout) is retried with backoff;
 * every op is an idempotent upsert or a guarded update, so a retry cannot apply twice, and the ops
 * a store says it committed before the failure (`committedOf`) are answered and not written again.
 */
import type { Store, WriteOp, WriteResult } from './store.ts';
import { committedOf } from './store/journal.ts';
import { ERROR_CODES, isStepwiseError } from './errors.ts';
import { GroupCommit, type Pending as Queued } from './group-commit.ts';

type Pending = Queued<WriteOp, WriteResult>;

export interface WriteBatcherOptions {
  /** Attempts of a failing batch before its ops are rejected. @defaultValue 6 */
  maxAttempts?: number;
  /** Most ops in one transaction. @defaultValue 256 */
  maxBatch?: number;
  /**
   * Batches written at once. 1 suits a store with one connection (SQLite); a pooled store
   * (PostgreSQL) overlaps round trips, and the database groups the commits' log flushes.
   * @defaultValue 1
   */
  maxInFlight?: number;
  /** Called when a batch failed and will be retried. */
  onRetry?: (error: unknown, attempt: number) => void;
  /**
   * Whether there is nobody to group with (one run in flight): then a write that finds nothing
   * queued or in flight goes to the store at once instead of waiting for the tick's other requests.
   */
  alone?: () => boolean;
  /**
   * Called after ops were committed, with each op's own result (for log readers, and for the
   * waiters of tasks a transition finished).
   */
  onCommitted?: (ops: readonly WriteOp[], results: readonly WriteResult[]) => void;
}

export class WriteBatcher {
  readonly #store: Store;
  readonly #maxAttempts: number;
  readonly #onRetry: ((error: unknown, attempt: number) => void) | undefined;
  readonly #alone: () => boolean;
  readonly #onCommitted: ((ops: readonly WriteOp[], results: readonly WriteResult[]) => void) | undefined;
  readonly #group: GroupCommit<WriteOp, WriteResult>;

  constructor(store: Store, options: WriteBatcherOptions = {}) {
    this.#store = store;
    this.#maxAttempts = options.maxAttempts ?? 6;
    // Keyed by task: a task's writes wait for its batch in flight and then go out together (see GroupCommit).
    this.#group = new GroupCommit(
      (batch) => this.#commit(batch),
      options.maxBatch ?? 256,
      options.maxInFlight ?? 1,
      (op) => op.taskId,
    );
    this.#onRetry = options.onRetry;
    this.#alone = options.alone ?? (() => false);
    this.#onCommitted = options.onCommitted;
  }

  write(op: WriteOp): Promise<WriteResult> {
    if (!this.#group.queued && !this.#group.inFlight && this.#alone()) {
      // Nobody to group with: write now, without waiting for the tick's other requests. A failure
      // goes to the queue below, written again with the batches' retries and backoff (every op
      // is idempotent).
      if (this.#store.writeBatchNow) {
        try {
          const results = this.#store.writeBatchNow([op]);
          this.#onCommitted?.([op], results);
          return Promise.resolve(results[0] as WriteResult);
        } catch (e) {
          this.#onRetry?.(e, 1);
          return this.#group.enqueueFirst(sentAgain(op));
        }
      }
      // Its task is busy meanwhile: its next writes wait for this one (see GroupCommit).
      this.#group.begin(op);
      return this.#store.writeBatch([op]).then(
        (results) => {
          this.#group.end(op);
          this.#onCommitted?.([op], results);
          return results[0] as WriteResult;
        },
        (e: unknown) => {
          this.#onRetry?.(e, 1);
          // Tried again ahead of its task's later writes, queued while it was in flight.
          const again = this.#group.enqueueFirst(sentAgain(op));
          this.#group.end(op);
          return again;
        },
      );
    }
    return this.#enqueue(op);
  }

  #enqueue(op: WriteOp): Promise<WriteResult> {
    return this.#group.enqueue(op);
  }

  /** Resolves once everything queued so far has been written. */
  async drain(): Promise<void> {
    while (this.#group.queued || this.#group.inFlight) await new Promise((r) => setImmediate(r));
  }

  /** Resolves the ops of `batch` that `committed` answers (by index); returns the others. */
  #settleCommitted(batch: Pending[], committed: ReadonlyMap<number, WriteResult> | undefined): Pending[] {
    if (!committed?.size) return batch;
    const done: Pending[] = [];
    const results: WriteResult[] = [];
    const rest: Pending[] = [];
    batch.forEach((p, i) => {
      if (!committed.has(i)) return void rest.push(p);
      done.push(p);
      results.push(committed.get(i) as WriteResult);
    });
    this.#onCommitted?.(itemsOf(done), results);
    answerAll(done, results);
    return rest;
  }

  async #commit(batch: Pending[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const ops = itemsOf(batch);
        const results = await this.#store.writeBatch(ops);
        this.#onCommitted?.(ops, results);
        answerAll(batch, results);
        return;
      } catch (e) {
        // Ops the store committed before it failed are answered now and not written again.
        batch = this.#settleCommitted(batch, committedOf(e));
        if (!batch.length) return;
        if (isStepwiseError(e, ERROR_CODES.STORE_REFUSED)) {
          // Refused for its content, which the same write cannot change: alone, the op fails now;
          // in a batch, each op is written on its own so that only the refused one fails.
          // (One task's ops one after another, in order; tasks side by side.)
          if (batch.length === 1) (batch[0] as Pending).reject(e);
          else
            await Promise.all(
              [...byTask(batch).values()].map(async (ops) => {
                for (const p of ops) await this.#commit([p]);
              }),
            );
          return;
        }
        if (attempt >= this.#maxAttempts) {
          for (const p of batch) p.reject(e);
          return;
        }
        this.#onRetry?.(e, attempt);
        await new Promise((r) => setTimeout(r, Math.min(2000, 50 * 2 ** attempt)));
        batch = batch.map((p) => ({ ...p, item: sentAgain(p.item) }));
      }
    }
  }
}

/**
 * `op` as it is sent after a failed attempt, which may have committed before its answer was lost:
 * a checkpoint then counts a row identical to it as its own (see `StepWrite.again`). A transition
 * needs no mark: its guard refuses a second application.
 */
function sentAgain(op: WriteOp): WriteOp {
  return op.kind === 'step' && !op.again ? { ...op, again: true } : op;
}

/** The ops of a batch by task, each task's in batch order. */
function byTask(batch: readonly Pending[]): Map<string, Pending[]> {
  const out = new Map<string, Pending[]>();
  for (const p of batch) {
    const list = out.get(p.item.taskId);
    if (list) list.push(p);
    else out.set(p.item.taskId, [p]);
  }
  return out;
}

// A batch's ops and answers, by loops of the module rather than per-call closures (see resolvers.ts).
function itemsOf(batch: readonly Pending[]): WriteOp[] {
  const ops = new Array<WriteOp>(batch.length);
  for (let i = 0; i < batch.length; i++) ops[i] = (batch[i] as Pending).item;
  return ops;
}

function answerAll(batch: readonly Pending[], results: readonly WriteResult[]): void {
  for (let i = 0; i < batch.length; i++) (batch[i] as Pending).resolve(results[i] as WriteResult);
}
