/**
 * @module idempotency/step-key
 * Internal: not part of the public API.
 * Steps with a business key (`ctx.step(name, fn, { key })`). The step's key is
 * `v<keyVersion>:<key>`; before its first attempt the step claims the idempotency record of that key
 * in the engine's database:
 * - completed (by this task before a crash, or by another task): the recorded result is the step's
 *   result, checkpointed like any result, without running the function (an `idempotency:hit`);
 * - in progress under another live owner: the step waits for it (then gets its result), or takes
 *   the record over once that owner's lease has run out (an `idempotency:takeover`);
 * - otherwise this task owns it and the step runs as usual (`step-attempt.ts`); its successful
 *   result is stored in the record before the checkpoint, so a crash between the two replays as a
 *   hit. A step that fails for good marks the record failed: a later run may try again.
 *
 * The owner is the task (`task:<id>`), not the run: a task resuming after a crash takes its own
 * record back at once, without waiting for the lease of the run that died.
 */
import { toMs } from '../duration.ts';
import { InvalidArgumentError, StepFailedError, coerceError } from '../errors.ts';
import { decodeJson, encodeError, encodeJson } from '../serialize.ts';
import type { StepContext, StepOptions } from '../api/step.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { executeStep } from '../primitives/step-attempt.ts';
import type { StepCall } from '../primitives/step-call.ts';
import { checkKey } from './keys.ts';
import { leaseLostError, type Idempotency, type ResolvedRunOptions } from './run.ts';

declare module '../run/run.ts' {
  interface RunServices {
    /** Idempotency records (steps with a business key, at-most-once intents); absent: those steps are refused. */
    idempotency?: Idempotency | undefined;
  }
}

const DEFAULT_KEY_TTL_MS = 30 * 86_400_000;
/** A step's record lease: renewed while the step runs; a dead task's record is taken over after it. */
const STEP_LEASE_MS = 30_000;

/** The step's idempotency key from its business key: `v<keyVersion>:<key>`. Fails the run on a bad key. */
export function businessKey(run: Run, stepId: string, options: StepOptions): string {
  const version = options.keyVersion ?? 1;
  if (!Number.isInteger(version) || version < 1) throw run.fail(new InvalidArgumentError(`ctx.step("${stepId}"): keyVersion must be an integer ≥ 1, got ${String(version)}.`));
  let key: unknown = options.key;
  if (typeof key === 'function') {
    try {
      key = (key as (input: unknown) => unknown)(decodeJson(run.task.input));
    } catch (e) {
      throw run.fail(new InvalidArgumentError(`ctx.step("${stepId}"): the key function threw: ${coerceError(e).message}`, { cause: e }));
    }
  }
  if (typeof key !== 'string' || !key) {
    throw run.fail(new InvalidArgumentError(`ctx.step("${stepId}"): key must be a non-empty string, or a function of the workflow's input returning one; got ${typeof key}.`));
  }
  try {
    return checkKey(`v${version}:${key}`, `The business key of step "${stepId}"`);
  } catch (e) {
    throw run.fail(e as Error);
  }
}

/** Runs a step with a business key (see the module doc). */
export async function keyedStep<T>(run: Run, c: StepCall<T>): Promise<T> {
  const idempotency = run.deps.idempotency;
  const backend = run.deps.store.idempotencyRecords?.();
  if (!idempotency || !backend) throw run.fail(new InvalidArgumentError(`ctx.step("${c.stepId}"): a business key needs a store that keeps idempotency records (SQLite or PostgreSQL).`));
  const key = c.idempotencyKey;
  let ttlMs: number;
  try {
    ttlMs = c.options.keyTtl === undefined ? DEFAULT_KEY_TTL_MS : toMs(c.options.keyTtl, `keyTtl of step "${c.stepId}"`);
  } catch (e) {
    throw run.fail(e as Error);
  }
  const owner = `task:${run.taskId}`;
  const options: ResolvedRunOptions = { ttlMs, leaseMs: STEP_LEASE_MS, whileRunning: 'wait', fingerprint: null, signal: run.signal, taskId: run.taskId };
  // Claiming writes to the database: every result the code has received is durable first.
  await run.writer.flush();
  const claim = await idempotency.claim(backend, key, owner, options, { kind: 'worker', id: run.deps.workerId, step: c.stepId });
  if (!claim.owner) {
    // The operation already ran: its recorded result is this step's, checkpointed as it is handed over.
    const now = run.deps.clock.now();
    const row = journalRow(run, c.seq, c.stepId, 'step', { output: claim.result, attempts: 0, startedAt: now, finishedAt: now });
    return run.writer.complete(row, () => decodeJson(claim.result) as T);
  }
  const fn = c.fn;
  // A lost record (taken over, or its store away for about a lease) aborts the step's signal: the
  // operation is another owner's now, and this step's result could not be stored anyway.
  const lost = new AbortController();
  c.fn = async (s: StepContext): Promise<T> => {
    const value = await fn(Object.freeze({ ...s, signal: AbortSignal.any([s.signal, lost.signal]) }));
    // Stored before the checkpoint: a crash between the two is a hit on resume, not a second run.
    // Refused (the record was taken over) or the store away past the lease: the step fails with it.
    await idempotency.settle(
      backend,
      key,
      owner,
      encodeJson(value, () => `The output of step "${c.stepId}"`),
      ttlMs,
      lease.heldUntil(),
    );
    return value;
  };
  const lease = idempotency.keepAlive(backend, key, owner, STEP_LEASE_MS, (why) => lost.abort(leaseLostError(key, why)));
  try {
    return await executeStep(run, c);
  } catch (e) {
    if (e instanceof StepFailedError) await backend.fail(key, owner, encodeError(e.cause ?? e), run.deps.clock.now(), ttlMs).catch(() => undefined);
    throw e;
  } finally {
    lease.stop();
  }
}
