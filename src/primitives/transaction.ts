/**
 * @module primitives/transaction
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.transaction(name, fn, options)`: a step whose effects are SQL on the engine's own database.
 * `fn` runs inside a database transaction, and the step's checkpoint (its journal row, fenced by
 * the run's epoch) is written in that same transaction: both commit or neither (R24). A crash
 * anywhere before the commit rolls the user's writes back with the missing checkpoint, and the
 * step runs again; after the commit, the checkpoint is there and replay hands its result back. So
 * the writes happen exactly once. A run that lost its lease has its checkpoint refused, and the
 * user's writes roll back with it.
 *
 * Unlike a plain step's, the checkpoint is not deferred: it is the commit. A failed attempt rolls
 * back and is retried per the step's retry policy, in-process (a transaction holds no slot while it
 * backs off only in the sense that nothing else is open); a failure for good is recorded like a
 * step's.
 */
import { TRANSACTION_OPTION_NAMES } from '../api/step.ts';
import { checkCallOptions } from './call-options.ts';
import { LeaseLostError, StepFailedError, coerceError, InvalidArgumentError } from '../errors.ts';
import { redoSuffix } from '../run/redo.ts';
import { faultPoint } from '../fault-points.ts';
import { encodeWithin } from '../limits.ts';
import { backoffMs, resolveRetry, shouldRetry, type RetryPolicy } from '../retry.ts';
import { decodeError, decodeJson, deserializeError } from '../serialize.ts';
import type { StepRow, TransactionCheckpoint } from '../store.ts';
import { engineKey } from '../idempotency/keys.ts';
import type { Transaction } from '../transaction-types.ts';
import type { TransactionOptions } from '../api/step.ts';
import { parked, type Activity } from '../run/activity.ts';
import { call, type Primitive } from '../run/call.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { isCleanupSeq } from '../run/cleanup-scope.ts';
import type { Reservation } from '../run/hand-over.ts';
import { haltReason, throwIfHalted } from '../run/state.ts';
import { attemptOf, stepFailed } from './step-call.ts';

type TxFn = (tx: Transaction) => Promise<unknown>;

interface TxCall {
  seq: number;
  stepId: string;
  /** The step's key as observers and `StepInfo` report it (the function itself receives none). */
  idempotencyKey: string;
  fn: TxFn;
  policy: RetryPolicy;
  activity: Activity;
  attempt: number;
  firstStart: number;
  runner: NonNullable<Run['deps']['store']['runInTransaction']>;
}

const TRANSACTION: Primitive<TxFn, TransactionOptions | undefined, TxCall, unknown> = {
  kind: 'step',
  replayed(rec: StepRow, stepId: string) {
    if (rec.status === 'completed') return decodeJson(rec.output);
    throw new StepFailedError(stepId, rec.attempts, deserializeError(decodeError(rec.error as string)));
  },
  prepare(run, pos, fn, options = {}) {
    if (typeof fn !== 'function') throw run.fail(new InvalidArgumentError(`ctx.transaction("${pos.name}"): the second argument must be an async function of the transaction.`));
    checkCallOptions(run, options, TRANSACTION_OPTION_NAMES, `ctx.transaction("${pos.name}")`);
    const store = run.deps.store;
    if (!store.runInTransaction) throw run.fail(new InvalidArgumentError(`ctx.transaction("${pos.name}"): the store ${store.description} does not run transactional steps.`));
    let policy: RetryPolicy;
    try {
      policy = resolveRetry(options.retry, run.defaultRetry);
    } catch (e) {
      throw run.fail(new InvalidArgumentError(`ctx.transaction("${pos.name}"): ${coerceError(e).message}`, { cause: e }));
    }
    return {
      seq: pos.seq,
      stepId: pos.stepId,
      idempotencyKey: engineKey(run.taskId, pos.name, pos.occurrence) + redoSuffix(run.task.redo, pos.stepId),
      fn,
      policy,
      activity: null as unknown as Activity,
      attempt: pos.recorded?.attempts ?? 0,
      firstStart: 0,
      runner: store.runInTransaction.bind(store) as TxCall['runner'],
    };
  },
  start(run, c, activity) {
    c.activity = activity;
    return executeTransaction(run, c);
  },
};

async function executeTransaction(run: Run, c: TxCall): Promise<unknown> {
  // `run.deps` is read at each use: a run resumed after a park has the services of its new claim.
  const { clock } = run.deps;
  c.firstStart = clock.now();
  for (;;) {
    // No side effect before every result the code has received is durable.
    await run.writer.flush();
    throwIfHalted(run.state);
    if (run.blocked()) {
      run.refuse();
      c.activity.idle();
      return parked(run);
    }
    c.attempt++;
    if (run.deps.hears('step:started')) run.deps.emit('step:started', attemptOf(run, c));
    const started = clock.now();
    let output: string | null = null;
    // Its place among the results the code receives, taken as its checkpoint is written.
    const place: { slot: Reservation<unknown> | null } = { slot: null };
    let accepted: boolean;
    try {
      ({ accepted } = await c.runner(
        async (tx) => {
          const value = await c.fn(tx);
          output = encodeWithin(value, () => `The result of transaction "${c.stepId}"`, run.deps.outputBytes, 'outputBytes');
          return value;
        },
        (): TransactionCheckpoint => {
          // Its place among the results the code receives is taken as it is written: a result
          // recorded after it, while the commit's answer is on its way, reaches the code after it.
          const done = run.replay.nextDone();
          place.slot?.cancel(); // a store that prepared the checkpoint twice: the first place is given up
          place.slot = run.replay.reserve(done, isCleanupSeq(c.seq));
          const row = journalRow(run, c.seq, c.stepId, 'step', { output, attempts: c.attempt, startedAt: c.firstStart, finishedAt: clock.now(), done });
          return { write: { kind: 'step', taskId: run.taskId, epoch: run.epoch, step: row }, blobs: [] };
        },
      ));
    } catch (raw) {
      place.slot?.cancel();
      throwIfHalted(run.state);
      const error = coerceError(raw);
      if (!shouldRetry(c.policy, error, c.attempt)) return stepFailed(run, c, error);
      const delayMs = backoffMs(c.policy, c.attempt, error);
      run.deps.emit('step:retrying', { ...attemptOf(run, c), delayMs, error, parked: false });
      await clock.sleep(delayMs, run.signal);
      continue;
    }
    if (!accepted) {
      place.slot?.cancel();
      // The fence refused the checkpoint: another worker owns the task; the writes rolled back.
      run.lose('lease', () => new LeaseLostError(run.taskId, run.epoch));
      throw haltReason(run.state);
    }
    faultPoint('transaction:committed');
    if (run.deps.hears('step:completed')) run.deps.emit('step:completed', { ...attemptOf(run, c), durationMs: clock.now() - started });
    const result = output;
    // Accepted: the checkpoint was written, and its place taken with it.
    const slot = place.slot as Reservation<unknown>;
    slot.settle(() => decodeJson(result));
    return slot.promise;
  }
}

export function transaction<T>(run: Run, name: string, fn: (tx: Transaction) => Promise<T>, options?: TransactionOptions): Promise<T> {
  return call(run, TRANSACTION, name, fn as TxFn, options) as Promise<T>;
}
