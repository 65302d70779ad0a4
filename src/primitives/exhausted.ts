/**
 * @module primitives/exhausted
 * Internal: not part of the public API (the package exports only its index modules).
 * What a step does when its attempts (or repairs) run out, per its `onExhausted` option:
 * `'fail'` records the failure and hands the code a StepFailedError; `'skip'` records the step as
 * completed with its declared `fallback` as output and the exhausting error kept beside it (a
 * skipped step: `show` and `engine.get()` say so), and hands the code the fallback. A replay of
 * a skipped step returns the fallback again without running it. `'ask'` parks the step on a
 * person's decision (see `exhausted-ask.ts`).
 */
import { InvalidArgumentError } from '../errors.ts';
import { resolveOptions } from '../approvals/policy.ts';
import { askOptions } from '../approvals/decision-data.ts';
import { isStandardSchema } from '../failure/validate.ts';
import { encodeError, encodeJson } from '../serialize.ts';
import type { StepOptions } from '../api/step.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { attemptOf, type StepCall } from './step-call.ts';

const ON_EXHAUSTED = ['fail', 'skip', 'ask'];

/**
 * The step's failure options checked before its first attempt: a mistake here is the code's, and
 * fails the task at once (with an actionable message) rather than after the attempts.
 */
export function checkFailureOptions(stepId: string, o: StepOptions): Error | null {
  const bad = (m: string): Error => new InvalidArgumentError(`ctx.step("${stepId}"): ${m}`);
  if (o.classify !== undefined && typeof o.classify !== 'function') return bad('classify must be a function of the error.');
  if (o.output !== undefined && !isStandardSchema(o.output)) return bad('output must be a Standard Schema (with ~standard.validate; zod 3.24+ has it).');
  if (o.repair !== undefined) {
    const n = typeof o.repair === 'number' ? o.repair : (o.repair as { maxAttempts?: unknown } | null)?.maxAttempts;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) return bad(`repair.maxAttempts must be an integer ≥ 0, got ${JSON.stringify(n)}.`);
  }
  if (o.onExhausted !== undefined && !ON_EXHAUSTED.includes(o.onExhausted)) return bad(`onExhausted must be 'fail', 'skip' or 'ask', got ${JSON.stringify(o.onExhausted)}.`);
  if (o.ask !== undefined && o.onExhausted !== 'ask') return bad("ask (who decides an exhausted step) needs onExhausted: 'ask'.");
  if (o.onExhausted === 'ask') {
    try {
      resolveOptions(`exhausted:${stepId}`, askOptions(o.ask));
    } catch (e) {
      return bad((e as Error).message);
    }
  }
  if (o.onExhausted === 'skip' && !('fallback' in o))
    return bad("onExhausted: 'skip' needs a declared fallback (the output the step gives when skipped), e.g. { onExhausted: 'skip', fallback: null }.");
  if (o.onExhausted === 'skip' && o.compensate !== undefined)
    return bad("a step that may be skipped (onExhausted: 'skip') cannot have a compensate: a skipped step did nothing to undo; compensate inside the step's code instead.");
  if ('fallback' in o && o.onExhausted !== 'skip' && o.onExhausted !== 'ask')
    return bad("fallback is the output of a skipped step: it needs onExhausted: 'skip' (or 'ask', for a skip decision).");
  if ('fallback' in o && o.onExhausted === 'ask' && o.compensate !== undefined)
    return bad("a step that may be skipped (a fallback under onExhausted: 'ask') cannot have a compensate: a skipped step did nothing to undo.");
  if ('fallback' in o) {
    try {
      encodeJson(o.fallback, `The fallback of step "${stepId}"`);
    } catch (e) {
      return e as Error;
    }
  }
  return null;
}

/** Repair attempts allowed by the step's options. */
export function repairBudget(o: StepOptions): number {
  return o.repair === undefined ? 0 : typeof o.repair === 'number' ? o.repair : o.repair.maxAttempts;
}

/** The step ran out of attempts with `error`: fail it, or skip it with its fallback. */
export function exhausted<T>(run: Run, c: StepCall<T>, error: Error, fail: (run: Run, c: StepCall<T>, error: Error) => Promise<T>): Promise<T> {
  if (c.options.onExhausted !== 'skip') return fail(run, c, error);
  run.deps.emit('step:failed', { ...attemptOf(run, c), error });
  const output = encodeJson(c.options.fallback, `The fallback of step "${c.stepId}"`);
  const row = journalRow(run, c.seq, c.stepId, 'step', {
    status: 'completed',
    output,
    error: encodeError(error),
    attempts: c.attempt,
    startedAt: c.firstStart,
    finishedAt: run.deps.clock.now(),
  });
  return run.writer.complete(row, () => (output === null ? undefined : JSON.parse(output)) as T);
}
