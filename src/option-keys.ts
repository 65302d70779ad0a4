/**
 * @module option-keys
 * Refuses an options object with a key the command does not know: a mistyped `idempotencyKey`
 * (`idempotencykey`) would otherwise be ignored silently and start a duplicate.
 */
import { InvalidArgumentError } from './errors.ts';

/** Throws INVALID_ARGUMENT naming the unknown keys of `options` and the known ones. */
export function checkOptionKeys(options: unknown, known: readonly string[], where: string): void {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidArgumentError(`${where}: options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new InvalidArgumentError(`${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${known.join(', ')}).`);
  }
}

export const START_OPTIONS = ['by', 'idempotencyKey', 'delay', 'budget', 'deadline', 'title', 'debounce', 'singleton', 'priority', 'tags', 'version'] as const;
export const START_MANY_ITEM = ['workflow', 'input', ...START_OPTIONS] as const;
export const LIST_OPTIONS = ['status', 'workflow', 'tags', 'createdAfter', 'createdBefore', 'failedWith', 'text', 'parent', 'limit', 'cursor'] as const;
export const COUNT_OPTIONS = ['status', 'workflow', 'due', 'cap'] as const;
export const GET_OPTIONS = ['steps', 'history'] as const;
export const RESULT_OPTIONS = ['timeout', 'signal'] as const;
export const CANCEL_OPTIONS = ['by', 'reason'] as const;
export const MOVE_OPTIONS = ['by', 'subtree'] as const;
export const RETRY_OPTIONS = ['by', 'fromStep', 'deadline', 'compensate'] as const;
export const FORK_OPTIONS = ['by', 'fromStep', 'input', 'tags', 'title'] as const;
export const BULK_OPTIONS = ['by', 'action', 'filter', 'dryRun', 'limit', 'reason', 'fromStep', 'compensate'] as const;
export const SIGNAL_OPTIONS = ['by', 'idempotencyKey', 'requireWaiting'] as const;
export const APPROVALS_QUERY = ['status', 'approver', 'roles', 'workflow', 'taskId', 'limit'] as const;
export const PURGE_OPTIONS = ['by', 'olderThan', 'status', 'workflow', 'dryRun', 'limit'] as const;
export const DELETE_OPTIONS = ['by'] as const;
export const SEND_OPTIONS = ['by', 'idempotencyKey'] as const;
export const SCHEDULE_LIST_OPTIONS = ['workflow', 'after', 'limit'] as const;

/**
 * The option names of `T`, all of them: `optionNames<WorkerOptions>()('concurrency', …)` does not
 * compile while a key of `T` is missing from the list, so a new option cannot be forgotten by the
 * check that refuses unknown ones.
 */
export function optionNames<T>() {
  return <const K extends readonly (keyof T & string)[]>(...keys: K & (Exclude<keyof T, K[number]> extends never ? unknown : { missing: Exclude<keyof T, K[number]> })): K => keys;
}
