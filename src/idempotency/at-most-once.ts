/**
 * @module idempotency/at-most-once
 * Internal: not part of the public API.
 * At-most-once steps (`ctx.step(name, fn, { effect: 'at-most-once', verify })`) for systems that
 * ignore idempotency keys (an SMS vendor: calling twice sends two messages).
 *
 * Before each attempt calls `fn`, its intent is recorded durably (an idempotency record
 * `intent:<task>:<step>`, `in_progress`); when `fn` returns, its result is stored in the record
 * before the checkpoint; when it throws, the record is marked failed (the code saw the call fail,
 * so another attempt may call again). After a crash, a step whose intent is still in progress may
 * or may not have had its effect, and is never re-run blindly: `verify` is asked, and answers
 * - `{ status: 'done', result }`: it happened; `result` is the step's result, `fn` is not called;
 * - `{ status: 'not-done' }`: it did not; the step runs `fn`;
 * - `{ status: 'unknown' }` (or no `verify`): the task parks in `waiting` on an approval named
 *   `effect:<step>` (payload `{ step, question, reason, actions }`), until a person decides it
 *   with `engine.decide(id, { approve: true, by, data: { action: 'rerun' | 'skip' | 'fail', result } })`
 *   (or `engine.decideEffect(taskId, step, action, { result, by })`, which finds the approval):
 *   run `fn` again, skip it with `result` as the step's result, or fail the step; a rejection fails
 *   it. The approval is the record of the decision: decided once, idempotent with a key.
 */
import { InvalidArgumentError, NonRetryableError, StepFailedError, coerceError } from '../errors.ts';
import { decodeJson, encodeError, encodeJson } from '../serialize.ts';
import type { StepContext, VerifyAnswer } from '../api/step.ts';

export type { VerifyAnswer, VerifyContext } from '../api/step.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { executeStep } from '../primitives/step-attempt.ts';
import type { StepCall } from '../primitives/step-call.ts';
import { throwIfHalted } from '../run/state.ts';
import { ASK_PREFIX, parseEffect } from '../approvals/decision-data.ts';
import { recordedAsk, stepAsk } from '../primitives/step-ask.ts';
import type { IdempotencyBackend } from './records.ts';

/** A person's decision on an at-most-once step whose outcome nobody could verify. */
export type EffectDecision = 'rerun' | 'skip' | 'fail';
export const EFFECT_DECISIONS: readonly EffectDecision[] = ['rerun', 'skip', 'fail'];

/** The name of the approval that decides an unverifiable at-most-once step `stepId`. */
export function effectApprovalName(stepId: string): string {
  return `effect:${stepId}`;
}

/** An intent lives as long as the task may need it; it is never taken over (it has no live owner to lose). */
const INTENT_LEASE_MS = 100 * 365 * 86_400_000;
const INTENT_TTL_MS = 90 * 86_400_000;

export async function atMostOnceStep<T>(run: Run, c: StepCall<T>): Promise<T> {
  const backend = run.deps.store.idempotencyRecords?.();
  if (!backend) throw run.fail(new InvalidArgumentError(`ctx.step("${c.stepId}"): an at-most-once step needs a store that keeps idempotency records (SQLite or PostgreSQL).`));
  const verify = c.options.verify;
  if (verify !== undefined && typeof verify !== 'function') throw run.fail(new InvalidArgumentError(`ctx.step("${c.stepId}"): verify must be a function.`));
  const key = `intent:${run.taskId}:${c.stepId}`;
  const owner = `task:${run.taskId}`;
  const { clock } = run.deps;
  await run.writer.flush();
  const intent = await backend.get(key);
  if (intent?.status === 'completed') {
    // The call returned before a crash, and its result was stored before the checkpoint.
    return handBack(run, c, intent.result);
  }
  // A run resumed while parked on the decision waits on the same approval (verify is not asked again).
  const parkedOnAsk = recordedAsk(c.recorded)?.ask === 'effect';
  // One pass: every way out of it returns the step's outcome or goes on to run `fn` (break).
  unsure: if (intent?.status === 'in_progress') {
    // The last attempt recorded its intent and never came back: its effect may have happened.
    let reason: string | null = null;
    if (!parkedOnAsk) {
      let answer: VerifyAnswer = { status: 'unknown' };
      if (verify) {
        try {
          answer = await verify(Object.freeze({ idempotencyKey: c.idempotencyKey, taskId: run.taskId, stepName: c.stepId, signal: run.signal }));
        } catch (e) {
          throwIfHalted(run.state);
          answer = { status: 'unknown', reason: `verify threw: ${coerceError(e).message}` };
        }
      }
      throwIfHalted(run.state);
      if (answer?.status === 'done') {
        const result = encodeJson(answer.result, () => `The result verify gave for step "${c.stepId}"`);
        await backend.complete(key, owner, result, clock.now(), INTENT_TTL_MS);
        return handBack(run, c, result);
      }
      if (answer?.status === 'not-done') {
        await backend.fail(key, owner, encodeError(new Error('verified not done')), clock.now(), INTENT_TTL_MS);
        break unsure;
      }
      reason = answer && 'reason' in answer ? (answer.reason ?? null) : null;
    }
    // Unknown: park on an approval until a person decides (no worker slot held meanwhile).
    const decided = await askPerson(run, c, { backend, key, owner, updatedAt: intent.updatedAt }, reason, parkedOnAsk);
    if (decided) return decided.done;
  }
  const fn = c.fn;
  c.fn = async (s: StepContext): Promise<T> => {
    // The intent is durable before the call: a crash during it is seen, not silently re-run.
    const taken = await backend.acquire({ key, owner, fingerprint: null, now: clock.now(), leaseMs: INTENT_LEASE_MS, ttlMs: INTENT_TTL_MS, taskId: run.taskId });
    if (!taken.acquired) throw new NonRetryableError(`Step "${c.stepId}": its at-most-once intent is held by ${taken.record.owner ?? 'another owner'}.`);
    let value: T;
    try {
      value = await fn(s);
    } catch (e) {
      await backend.fail(key, owner, encodeError(coerceError(e)), clock.now(), INTENT_TTL_MS).catch(() => undefined);
      throw e;
    }
    await backend.complete(
      key,
      owner,
      encodeJson(value, () => `The output of step "${c.stepId}"`),
      clock.now(),
      INTENT_TTL_MS,
    );
    return value;
  };
  return executeStep(run, c);
}

/** The intent record of an at-most-once step. */
interface Intent {
  backend: IdempotencyBackend;
  key: string;
  owner: string;
  updatedAt: number;
}

/**
 * Parks on an approval `effect:<step>` until a person decides whether the attempt happened: the
 * step's end (failed, or skipped with a given result: `done`), or null to run it again (the decision is
 * recorded with the step's row first).
 */
async function askPerson<T>(run: Run, c: StepCall<T>, i: Intent, reason: string | null, parkedOnAsk: boolean): Promise<{ done: Promise<T> } | null> {
  const { clock } = run.deps;
  const { approvalId, decision, consume } = await stepAsk(run, c as StepCall<unknown>, {
    purpose: 'effect',
    // One approval per recorded intent: a crash before the park asks the same one again.
    callKey: `${ASK_PREFIX.effect}${c.stepId}@${run.task.retries}:${i.updatedAt}`,
    name: effectApprovalName(c.stepId),
    options: {
      payload: {
        step: c.stepId,
        question: `Did the at-most-once effect of step "${c.stepId}" happen? verify could not tell.`,
        reason,
        actions: EFFECT_DECISIONS,
      },
    },
    fields: { attempts: c.attempt, startedAt: c.recorded?.startedAt ?? clock.now() },
    resume: parkedOnAsk,
  });
  const parsed = decision.approved ? parseEffect(decision.data) : ({ ok: true, value: { action: 'fail' } } as const);
  const action = parsed.ok ? parsed.value : null;
  if (!action || action.action === 'fail') {
    const error = action
      ? new NonRetryableError(`Step "${c.stepId}" was failed by a person (approval ${approvalId}): its at-most-once effect could not be verified.`)
      : new InvalidArgumentError(`Step "${c.stepId}": the decision on approval ${approvalId} cannot be applied: ${parsed.ok ? '' : parsed.problem}.`);
    const row = journalRow(run, c.seq, c.stepId, 'step', { status: 'failed', error: encodeError(error), attempts: c.attempt, finishedAt: clock.now() });
    const done = run.writer.complete<T>(
      row,
      () => {
        throw new StepFailedError(c.stepId, c.attempt, error);
      },
      consume,
    );
    return { done };
  }
  if (action.action === 'skip') return { done: handBack(run, c, encodeJson(action.result, 'The result given to skip an at-most-once step'), consume) };
  // rerun: the decision is recorded (consumed) with the step's row, then the step runs.
  await i.backend.fail(i.key, i.owner, encodeError(new Error('re-run by decision')), clock.now(), INTENT_TTL_MS);
  await run.writer.checkpoint(journalRow(run, c.seq, c.stepId, 'step', { status: 'retrying', attempts: c.attempt, startedAt: clock.now(), wakeAt: clock.now() }), consume);
  return null;
}

/** The step's result, without calling `fn`: checkpointed as it is handed to the code. */
function handBack<T>(run: Run, c: StepCall<T>, output: string | null, consume?: { signalId: number; seq: number }): Promise<T> {
  const now = run.deps.clock.now();
  const row = journalRow(run, c.seq, c.stepId, 'step', { output, attempts: c.attempt, startedAt: c.recorded?.startedAt ?? now, finishedAt: now });
  return run.writer.complete(row, () => decodeJson(output) as T, consume);
}
