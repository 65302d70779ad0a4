/**
 * @module postgres/transaction
 * Internal: not part of the public API.
 * Transactional steps on PostgreSQL: the user's SQL and the step's checkpoint in one transaction on
 * one pooled connection. The checkpoint is the same fenced statement as any step's (its UPDATE of
 * the task's head holds off a concurrent claim until commit); a refused fence rolls the user's writes
 * back with it. A transaction that loses a deadlock is run again from the start, function included
 * (everything it did was rolled back).
 */
import { run, tx, type PgContext } from './connection.ts';
import { stepWrite } from './write-batch.ts';
import { InvalidArgumentError } from '../errors.ts';
import { faultPoint } from '../fault-points.ts';
import type { Transaction, TransactionCheckpoint } from '../store/transactions.ts';
import { writeBlobs } from './blobs.ts';

/** Thrown inside the transaction to roll it back when the fence refuses the checkpoint. */
class Refused extends Error {}

export async function runInTransaction<T>(
  c: PgContext,
  fn: (tx: Transaction) => Promise<T>,
  checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>,
): Promise<{ value: T; accepted: boolean }> {
  let refusedValue: { value: T } | null = null;
  try {
    const value = await run(c, () =>
      tx(c, async (client) => {
        let open = true;
        const ended = (): never => {
          throw new InvalidArgumentError('This transaction has ended: use tx only inside the function given to ctx.transaction.');
        };
        const t: Transaction = Object.freeze({
          dialect: 'postgres' as const,
          query: async <Row extends Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<Row[]> =>
            open ? ((await client.query(sql, params as unknown[])).rows as Row[]) : ended(),
          execute: async (sql: string, params: readonly unknown[] = []): Promise<{ rowCount: number }> =>
            open ? { rowCount: (await client.query(sql, params as unknown[])).rowCount ?? 0 } : ended(),
        });
        try {
          faultPoint('transaction:begun');
          const v = await fn(t);
          faultPoint('transaction:written');
          const cp = await checkpoint(v);
          for (const b of cp.blobs) if (b.blobs.length) await writeBlobs(c, client, b);
          if (!(await stepWrite(c, client, cp.write))) {
            refusedValue = { value: v };
            throw new Refused();
          }
          faultPoint('transaction:checkpointed');
          return v;
        } finally {
          open = false;
        }
      }),
    );
    return { value, accepted: true };
  } catch (e) {
    if (e instanceof Refused && refusedValue) return { value: (refusedValue as { value: T }).value, accepted: false };
    throw e;
  }
}
