/**
 * @module primitives/exhausted-ask
 * Internal: not part of the public API (the package exports only its index modules).
 * `onExhausted: 'ask'`: when a step's attempts (or repairs) run out, the step parks on an approval
 * named `exhausted:<step>` (approvers, timeout and timeout policy from the step's `ask` option;
 * payload `{ step, attempts, error, actions }`). An approving decision's data says what the step
 * does (see `approvals/decision-data.ts`): `supply` records `output` as the step's output, `retry`
 * gives it a fresh set of attempts (those before do not count against its retry policy or repair
 * budget), `skip` records it skipped with its `fallback`, `fail` fails it. A rejection, or a
 * timeout that rejects, fails it with the error that exhausted it; data that cannot be applied
 * fails it with an INVALID_ARGUMENT error naming the approval. The outcome is written with the
 * step's row, consuming the approval's wake-up signal, so a crash never applies it twice.
 */
import { InvalidArgumentError, type NotSerializableError } from '../errors.ts';
import { ASK_PREFIX, askOptions, parseExhausted } from '../approvals/decision-data.ts';
import { classOf } from '../failure/classify.ts';
import { encodeWithin } from '../limits.ts';
import { decodeError, encodeError, encodeJson } from '../serialize.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { stepAsk } from './step-ask.ts';
import { attemptOf, stepFailed, type StepCall } from './step-call.ts';

type Consume = { signalId: number; seq: number } | undefined;

/** What the step does after the decision: attempt again, or the recorded outcome the code receives. */
export type ExhaustedOutcome<T> = { retry: true } | { retry: false; done: Promise<T> };

function completed<T>(run: Run, c: StepCall<T>, output: string | null, error: Error | null, consume: Consume): Promise<T> {
  const row = journalRow(run, c.seq, c.stepId, 'step', {
    status: 'completed',
    output,
    error: error ? encodeError(error) : null,
    attempts: c.attempt,
    startedAt: c.firstStart,
    finishedAt: run.deps.clock.now(),
  });
  return run.writer.complete(row, () => (output === null ? undefined : JSON.parse(output)) as T, consume);
}

/**
 * Step `c` ran out of attempts with `error` (or resumes such a park: `resume`): asks a person and
 * applies the decision.
 */
export async function askOnExhausted<T>(run: Run, c: StepCall<T>, error: Error, resume: boolean): Promise<ExhaustedOutcome<T>> {
  const canSkip = 'fallback' in c.options;
  const e = decodeError(encodeError(error));
  const payload = {
    step: c.stepId,
    attempts: c.attempt,
    error: { name: e.name, message: e.message, code: e.code ?? null },
    actions: canSkip ? ['supply', 'retry', 'skip', 'fail'] : ['supply', 'retry', 'fail'],
  };
  const { approvalId, decision, consume } = await stepAsk(run, c as StepCall<unknown>, {
    purpose: 'exhausted',
    // The attempt count makes each exhaustion its own approval, and a crash before the park asks the same one again.
    callKey: `${ASK_PREFIX.exhausted}${c.stepId}@${run.task.retries}:${c.attempt}`,
    name: `exhausted:${c.stepId}`,
    options: { ...askOptions(c.options.ask), payload },
    fields: { attempts: c.attempt, error: encodeError(error), startedAt: c.firstStart },
    resume,
  });
  if (!decision.approved) return { retry: false, done: stepFailed(run, c, error, consume) };
  const parsed = parseExhausted(decision.data, canSkip);
  if (!parsed.ok) {
    const bad = new InvalidArgumentError(`Step "${c.stepId}": the decision on approval ${approvalId} cannot be applied: ${parsed.problem}.`);
    return { retry: false, done: stepFailed(run, c, bad, consume) };
  }
  const action = parsed.value;
  switch (action.action) {
    case 'fail':
      return { retry: false, done: stepFailed(run, c, error, consume) };
    case 'skip':
      run.deps.emit('step:failed', { ...attemptOf(run, c), error });
      return { retry: false, done: completed(run, c, encodeJson(c.options.fallback, `The fallback of step "${c.stepId}"`), error, consume) };
    case 'supply': {
      let output: string | null;
      try {
        output = encodeWithin(action.output, () => `The output supplied for step "${c.stepId}"`, run.deps.outputBytes, 'outputBytes');
      } catch (x) {
        return { retry: false, done: stepFailed(run, c, x as NotSerializableError, consume) };
      }
      return { retry: false, done: completed(run, c, output, null, consume) };
    }
    case 'retry': {
      // A fresh set of attempts: the ones before are kept in the count, but not held against it.
      c.base = c.attempt;
      c.repairs = 0;
      const cls = classOf(error);
      if (cls) {
        cls.retriedAfter = c.base;
        delete cls.repairsUsed;
      }
      c.lastError = error;
      const now = run.deps.clock.now();
      await run.writer.checkpoint(
        journalRow(run, c.seq, c.stepId, 'step', {
          status: 'retrying',
          error: encodeError(error),
          attempts: c.attempt,
          startedAt: c.firstStart,
          wakeAt: now,
        }),
        consume,
      );
      return { retry: true };
    }
  }
}
