/**
 * @module payloads/sealed-writes
 * Internal: not part of the public API.
 * The payloads a codec seals that have no owner task and never go to blobs: an approval's
 * decisions and outcome (with the reviewers' data and comments) and the log entries that carry
 * them, and idempotency records' results and errors. Without a codec these pass as they are.
 */
import type { ApprovalChange, ApprovalRow, ApprovalUpdate, NewEvent, Store } from '../store.ts';
import type { IdempotencyBackend } from '../store/idempotency.ts';
import { APPROVAL_EVENT_TYPES } from '../task-events/approval.ts';
import type { PayloadLayer, Pending } from './payload-store.ts';
import { escapeMarks } from './token.ts';

/** Log entries that carry a reviewer's data or comment: sealed whole. */
const REVIEW_ENTRIES = new Set<string>([APPROVAL_EVENT_TYPES.decision, APPROVAL_EVENT_TYPES.decided]);

/** `updateApproval` with the decisions, the outcome and the review entries sealed. */
export function sealedApprovalUpdate(layer: PayloadLayer, s: Store): Store['updateApproval'] {
  // Without a codec, a reviewer's data that spells a token is written spelled otherwise.
  if (!layer.sealing)
    return async (w: ApprovalUpdate) =>
      layer.resolve(await s.updateApproval({ ...escapeChange(w), ...(w.plan ? { plan: (row: ApprovalRow, now: number) => mapChange(w.plan!(row, now), escapeChange) } : {}) }));
  return async (w: ApprovalUpdate) => {
    const p = layer.newPending();
    const seal = (ch: ApprovalChange): ApprovalChange => {
      const set = { ...ch.set };
      if (set.decisions !== undefined) set.decisions = layer.seal(p, set.decisions) as string;
      if (set.outcome !== undefined) set.outcome = layer.seal(p, set.outcome) as string | null;
      return { ...ch, set, log: sealEntries(layer, p, ch.log) };
    };
    // The plan judges the record as it is in the store's transaction: its sealed columns opened
    // there (no I/O: sealed values are in the row), its change sealed on the way back.
    const plan = w.plan;
    const write: ApprovalUpdate = { ...w, ...seal(w), ...(plan ? { plan: (row: ApprovalRow, now: number) => mapChange(plan(layer.openRow(row), now), seal) } : {}) };
    return layer.resolve(await s.updateApproval(write), p);
  };
}

function escapeChange<C extends ApprovalChange>(ch: C): C {
  const set = { ...ch.set };
  if (set.decisions !== undefined) set.decisions = escapeMarks(set.decisions);
  if (typeof set.outcome === 'string') set.outcome = escapeMarks(set.outcome);
  return { ...ch, set, log: ch.log.map((e) => (e.data && REVIEW_ENTRIES.has(e.type) ? { ...e, data: escapeMarks(e.data) } : e)) };
}

const mapChange = (ch: ApprovalChange | null, fn: (c: ApprovalChange) => ApprovalChange): ApprovalChange | null => (ch === null ? null : fn(ch));

/** Entries of `entries` that carry a review, with their data sealed. */
export function sealEntries(layer: PayloadLayer, p: Pending, entries: readonly NewEvent[]): NewEvent[] {
  if (!layer.sealing) return entries as NewEvent[];
  return entries.map((e) => (e.data && REVIEW_ENTRIES.has(e.type) ? { ...e, data: layer.seal(p, e.data) as string } : e));
}

/**
 * An idempotency record store whose results and errors are sealed (a codec's), read back opened;
 * its other members (`close` of a Redis backend) are the backend's own.
 */
export function sealedRecords(layer: PayloadLayer, backend: IdempotencyBackend): IdempotencyBackend {
  if (!layer.sealing) return backend;
  const seal = (text: string | null): string | null => layer.seal(layer.newPending(), text) as string | null;
  const own: Partial<IdempotencyBackend> = {
    acquire: async (r) => layer.resolve(await backend.acquire(r)),
    complete: (key, owner, result, now, ttlMs) => backend.complete(key, owner, seal(result), now, ttlMs),
    fail: (key, owner, error, now, ttlMs) => backend.fail(key, owner, seal(error) as string, now, ttlMs),
    get: async (key) => layer.resolve(await backend.get(key)),
  };
  return new Proxy(backend, {
    get(target, prop) {
      if (Object.hasOwn(own, prop)) return own[prop as keyof IdempotencyBackend];
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
