/**
 * @module approvals/types
 * The public shapes of approvals, declared with the public API in `api/approvals.ts`.
 */
export type * from '../api/approvals.ts';
