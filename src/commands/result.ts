/**
 * @module commands/result
 * `engine.result`: waits for a task to finish and answers its output, or rejects with the typed
 * error of its end. News of ends (this process's workers and commands, other processes through
 * the store's channel) wakes the wait; polling covers what no news reaches.
 */
import { RESULT_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { toMs } from '../duration.ts';
import { ERROR_CODES, InvalidArgumentError, TaskCancelledError, TaskFailedError, TaskNotFoundError, TimeoutError, isStepwiseError } from '../errors.ts';
import { decodeError, decodeJson, deserializeError } from '../serialize.ts';
import type { Store, TaskOutcome } from '../store.ts';
import type { ResultWaiters } from '../result-waiters.ts';
import type { CommandContext } from './context.ts';
import type { ResultOptions } from './options.ts';

export interface ResultDeps {
  ctx: CommandContext;
  waiters: ResultWaiters;
  /** Subscribes to finished tasks of other processes, once; whether that subscription is live. */
  listenSettled(store: Store): Promise<boolean>;
  /** Whether a worker of this process runs the task (it then announces the end of its run here). */
  heldHere(taskId: string): boolean;
}

/** The answer of a finished task: `{ output }` if it succeeded; throws the error of a failed or cancelled one; null if unfinished. */
function outcomeOf<O>(id: string, row: TaskOutcome | null): { output: O } | null {
  if (row?.status === 'succeeded') return { output: decodeJson(row.output) as O };
  if (row?.status === 'failed') {
    const error = row.error ? deserializeError(decodeError(row.error)) : undefined;
    // People must act on a failed cleanup, whatever ended the task: its error says what to undo.
    if (isStepwiseError(error, ERROR_CODES.COMPENSATION_FAILED)) throw error;
    throw new TaskFailedError(id, error);
  }
  if (row?.status === 'cancelled') throw new TaskCancelledError(id, row.cancelReason ?? undefined);
  return null;
}

export async function awaitResult<O>(deps: ResultDeps, id: string, options: ResultOptions): Promise<O> {
  checkOptionKeys(options, RESULT_OPTIONS, 'engine.result()');
  const { ctx, waiters } = deps;
  const store = await ctx.open();
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A task id is required.');
  const deadline = options.timeout === undefined ? Infinity : ctx.clock.now() + toMs(options.timeout, 'timeout');
  // With a live subscription a finished task is announced, and polling only covers what is
  // not (a notification sent while the listener reconnected, a task that a lease expiry ended).
  let pollMs = (await deps.listenSettled(store)) ? 250 : 25;
  // Listening starts before the first read: news that arrives while a read is in flight is kept
  // (the read may have seen the task unfinished). News from this process's own workers and
  // commands hands over the finished task's outcome, which is then not read again (result-waiters.ts).
  // A store whose calls hang (a network that drops packets) must not hold a read past the timeout.
  const late = (): Error => new TimeoutError(`Task ${id} could not be read within the timeout of ${String(options.timeout)}: the store did not answer.`);
  const watch = waiters.watch(id);
  // A task this engine created and has heard no end of yet is not read first (result-waiters.ts).
  let read = !waiters.knownUnfinished(id);
  try {
    for (;;) {
      watch.reset();
      // A blip of the store while waiting (a dropped connection, a database restarting) is waited
      // out like an unfinished task, until the deadline.
      const row =
        watch.settled ??
        (!read
          ? null
          : await waiters.read(store, id, deadline, late).then(
              (r) => {
                if (!r) throw new TaskNotFoundError(id);
                return r;
              },
              (e: unknown) => {
                if (!isStepwiseError(e, ERROR_CODES.STORE_UNAVAILABLE) || ctx.clock.now() >= deadline) throw e;
                return null;
              },
            ));
      const outcome = outcomeOf<O>(id, row);
      if (outcome) return outcome.output;
      options.signal?.throwIfAborted();
      const remaining = deadline - ctx.clock.now();
      if (remaining <= 0) throw new TimeoutError(`Task ${id} is still ${row?.status ?? 'unfinished'} after waiting ${options.timeout}.`);
      const woken = await watch.next(Math.min(pollMs, remaining), options.signal);
      pollMs = Math.min(1000, pollMs * 2);
      // A poll need not read a task that a worker of this process runs: that worker announces
      // the end of its run here (with the outcome, when it wrote the end).
      read = woken === 'news' || !deps.heldHere(id);
    }
  } finally {
    watch.close();
  }
}
