/**
 * @module store/transactions
 * What `ctx.transaction(name, fn)` hands to `fn`: the user's SQL on the engine's own database,
 * inside the transaction that also writes the step's checkpoint. A store that offers transactional
 * steps implements {@link TransactionRunner}.
 */
import type { StepWrite } from './journal.ts';
import type { BlobWrite } from './blobs.ts';

/** The open transaction, as the user's function sees it. */
export interface Transaction {
  /** Which SQL to write: SQLite (`?` placeholders) or PostgreSQL (`$1`, `$2`…). */
  readonly dialect: 'sqlite' | 'postgres';
  /** Runs a statement and returns its rows (none for a statement that returns no data). */
  query<Row extends Record<string, unknown> = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs a statement and returns how many rows it changed. */
  execute(sql: string, params?: readonly unknown[]): Promise<{ rowCount: number }>;
}

/** The checkpoint of a transactional step, and the blobs its payloads refer to (see store/blobs.ts). */
export interface TransactionCheckpoint {
  write: StepWrite;
  /** Written in the same transaction, before the checkpoint: kept and held if and only if it commits. */
  blobs: readonly BlobWrite[];
}

/** A store's transactional step (implemented by both stores): `fn`, then the checkpoint `checkpoint(value)` builds, in one transaction. */
export interface TransactionRunner {
  /**
   * Runs `fn` in one database transaction and writes the blobs and the fenced checkpoint that
   * `checkpoint(value)` gives in the same transaction; commits all, or rolls all back (and
   * `accepted` is false) when the fence refuses the checkpoint (the lease was lost). An error from
   * `fn` or `checkpoint` rolls back and is rethrown.
   */
  runInTransaction<T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>): Promise<{ value: T; accepted: boolean }>;
}

/** Transactional steps, where the store offers them. */
export interface TransactionStore {
  /** Transactional steps (`ctx.transaction`): the user's SQL and a checkpoint in one transaction. */
  runInTransaction?: TransactionRunner['runInTransaction'];
}
