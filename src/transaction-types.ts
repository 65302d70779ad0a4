/**
 * @module transaction-types
 * What `ctx.transaction(name, fn)` hands to `fn`; declared with the store contract (store/transactions.ts).
 */
export type { Transaction, TransactionRunner } from './store/transactions.ts';
