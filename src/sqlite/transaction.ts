/**
 * @module sqlite/transaction
 * Internal: not part of the public API.
 * Transactional steps on SQLite: the user's SQL and the step's checkpoint in one `BEGIN IMMEDIATE`
 * transaction, on a connection of their own (opened on first use), so that nothing else the
 * process writes meanwhile can fall into the open transaction. Transactions of one process run one
 * at a time on it; across processes the file's write lock orders them.
 *
 * The write lock is held from BEGIN to COMMIT. A function that awaits only `tx` calls finishes in
 * one turn of the event loop (better-sqlite3 is synchronous); one that awaits other I/O holds the
 * lock meanwhile, and other writers of the file wait for it (up to the busy timeout).
 */
import type Database from 'better-sqlite3';
import { InvalidArgumentError } from '../errors.ts';
import { faultPoint } from '../fault-points.ts';
import { journalCarries, stepEntry, stepEntryAt } from '../log-entries.ts';
import { stepValues } from '../rows.ts';
import type { StepWrite } from '../store.ts';
import type { Transaction, TransactionCheckpoint, TransactionRunner } from '../store/transactions.ts';
import { writeBlobs } from './blobs.ts';
import { FENCE_STEP_SQL, INSERT_EVENT_SQL, LAST_SEQ_SQL, UPSERT_STEP_SQL } from './sql.ts';

export class SqliteTransactions implements TransactionRunner {
  readonly #open: () => Database.Database;
  readonly #translate: (e: unknown) => unknown;
  #db: Database.Database | null = null;
  /** The transaction in progress (the next one starts when it has ended). */
  #queue: Promise<unknown> = Promise.resolve();

  /** @param open opens the dedicated connection; @param translate turns driver errors into Stepwise errors. */
  constructor(open: () => Database.Database, translate: (e: unknown) => unknown) {
    this.#open = open;
    this.#translate = translate;
  }

  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>): Promise<{ value: T; accepted: boolean }> {
    const next = this.#queue.then(() => this.#run(fn, checkpoint));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #run<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>): Promise<{ value: T; accepted: boolean }> {
    const db = (this.#db ??= this.#open());
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      throw this.#translate(e);
    }
    let open = true;
    const tx: Transaction = Object.freeze({
      dialect: 'sqlite' as const,
      query: async <Row extends Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<Row[]> => {
        if (!open) throw new InvalidArgumentError('This transaction has ended: use tx only inside the function given to ctx.transaction.');
        const stmt = db.prepare(sql);
        if (stmt.reader) return stmt.all(...params) as Row[];
        stmt.run(...params);
        return [];
      },
      execute: async (sql: string, params: readonly unknown[] = []): Promise<{ rowCount: number }> => {
        if (!open) throw new InvalidArgumentError('This transaction has ended: use tx only inside the function given to ctx.transaction.');
        return { rowCount: db.prepare(sql).run(...params).changes };
      },
    });
    try {
      faultPoint('transaction:begun');
      const value = await fn(tx);
      faultPoint('transaction:written');
      const cp = await checkpoint(value);
      for (const b of cp.blobs) if (b.blobs.length) writeBlobs((sql) => db.prepare(sql), b);
      const accepted = stepWriteOn(db, cp.write);
      if (!accepted) {
        db.exec('ROLLBACK');
        return { value, accepted: false };
      }
      faultPoint('transaction:checkpointed');
      db.exec('COMMIT');
      return { value, accepted: true };
    } catch (e) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw this.#translate(e);
    } finally {
      open = false;
    }
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}

/**
 * The fenced checkpoint on this connection: refused (false) unless the task is leased at the
 * writer's epoch. Its log seq is read here (this connection keeps no cache); the store's main
 * connection sees the commit through `data_version` and drops its own.
 */
function stepWriteOn(db: Database.Database, w: StepWrite): boolean {
  const task = db.prepare('SELECT no FROM stepwise_tasks WHERE id = ?').get(w.taskId) as { no: number } | undefined;
  if (!task || w.step.taskId !== w.taskId) return false;
  const fence = db.prepare(FENCE_STEP_SQL).get(task.no, w.taskId, w.epoch) as { lease_owner: string | null } | undefined;
  if (!fence) return false;
  const seq = Number((db.prepare(LAST_SEQ_SQL).get(task.no, task.no) as { n: number }).n) + 1;
  const carried = journalCarries(w.step);
  db.prepare(UPSERT_STEP_SQL).run(task.no, ...stepValues(w.step).slice(1), carried ? seq : null);
  if (!carried) {
    const entry = stepEntry('worker', fence.lease_owner ?? 'unknown', w.step);
    db.prepare(INSERT_EVENT_SQL).run(task.no, seq, stepEntryAt(w.step), entry.type, entry.actorKind, entry.actorId, entry.data);
  }
  return true;
}
