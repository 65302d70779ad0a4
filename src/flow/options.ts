/**
 * @module flow/options
 * Internal: not part of the public API (the package exports only its index modules).
 * Flow control options, checked where they are given: a workflow's per-key concurrency limit
 * (`concurrency: { key, limit }`) and its default `priority`, a start's `priority`. At start the
 * key is computed from the (parsed) input and stored on the task with its limit and priority.
 */
import { InvalidArgumentError } from '../errors.ts';

/** The lowest and highest priority a task may have; the default is {@link MIN_PRIORITY}. */
export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 1000;
/** How long one unit of priority counts as waiting (ms): claims order due tasks by `run_at - priority * PRIORITY_AGEING_MS`. */
export const PRIORITY_AGEING_MS = 1000;
/** The longest key a per-key limit accepts. */
export const MAX_KEY_LENGTH = 200;

/**
 * A limit per key: at most `limit` tasks of one key hold a lease (run) at once, across all
 * workers; the others wait, due, without holding a worker's slot, and run in due order.
 */
export interface ConcurrencyKeyLimit<I = unknown> {
  /** The key of a task, computed from its input at start (a string of 1-200 characters). */
  key: (input: I) => string;
  /** At most this many tasks of one key run at once (an integer ≥ 1). */
  limit: number;
}

/** Checks a workflow's `concurrency` option (a number, or a limit per key). */
export function checkConcurrency(where: string, value: unknown): void {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 1) throw new InvalidArgumentError(`${where}: concurrency must be an integer ≥ 1.`);
    return;
  }
  if (typeof value !== 'object' || value === null) throw new InvalidArgumentError(`${where}: concurrency must be an integer ≥ 1 or { key, limit }.`);
  const extra = Object.keys(value).filter((k) => k !== 'key' && k !== 'limit');
  if (extra.length) throw new InvalidArgumentError(`${where}: unknown concurrency option${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')} (known: key, limit).`);
  const { key, limit } = value as { key?: unknown; limit?: unknown };
  if (typeof key !== 'function') throw new InvalidArgumentError(`${where}: concurrency.key must be a function of the input that returns a string.`);
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) throw new InvalidArgumentError(`${where}: concurrency.limit must be an integer ≥ 1, got ${String(limit)}.`);
}

/** Checks a priority (a workflow's default or a start's). */
export function checkPriority(where: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < MIN_PRIORITY || value > MAX_PRIORITY) {
    throw new InvalidArgumentError(`${where}: priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${typeof value === 'number' ? value : JSON.stringify(value)}.`);
  }
  return value;
}

/** The per-key limit's key and limit of a task of `workflow` with `input`, or nulls. */
export function concurrencyKeyOf(workflow: string, concurrency: unknown, input: unknown): { concurrencyKey: string | null; concurrencyLimit: number | null } {
  if (typeof concurrency !== 'object' || concurrency === null) return { concurrencyKey: null, concurrencyLimit: null };
  const { key, limit } = concurrency as ConcurrencyKeyLimit;
  let k: unknown;
  try {
    k = key(input);
  } catch (e) {
    throw new InvalidArgumentError(`workflow("${workflow}"): concurrency.key threw: ${(e as Error)?.message ?? String(e)}`, { cause: e });
  }
  if (typeof k !== 'string' || k.length < 1 || k.length > MAX_KEY_LENGTH) {
    throw new InvalidArgumentError(
      `workflow("${workflow}"): concurrency.key must return a string of 1-${MAX_KEY_LENGTH} characters, got ${typeof k === 'string' ? `${k.length} characters` : typeof k}.`,
    );
  }
  // The key is per workflow: two workflows with a key "u1" do not share a limit.
  return { concurrencyKey: `${workflow}:${k}`, concurrencyLimit: limit };
}
