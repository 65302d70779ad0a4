/**
 * @module ai/metering/budget-ask
 * Internal: not part of the public API.
 * `budget: { …, onExceeded: { ask } }`: a model call that would exceed the task's budget parks
 * its step on an approval `budget:<step>` (payload {@link BudgetPayload}: the exceeded limit, the
 * budget, what was spent, what the call would reach) instead of failing the task. Approved with
 * data `{ tokens?, usd? }` (the new limits; the exceeded one raised to at least what the call
 * needs), the budget is raised in the task's usage column, durably, and the call is made; a
 * rejection, a timeout that rejects, or data that cannot be applied fails the task with
 * BUDGET_EXCEEDED. The approval is asked once per call: a resumed run finds it again (its call key
 * holds the task's attempt count, which the refused call did not change).
 */
import { BudgetExceededError } from '../../errors.ts';
import { ASK_PREFIX, askOptions, parseBudget, type BudgetPayload } from '../../approvals/decision-data.ts';
import type { ApprovalOptions } from '../../approvals/types.ts';
import { journalRow } from '../../run/identity.ts';
import { PARK_ON_STEP, stepAsk, type StepPark } from '../../primitives/step-ask.ts';
import { encodeError } from '../../serialize.ts';
import type { Budget, UsageSummary } from './usage.ts';

/** What a budget ask reads and raises: the run's usage meter (`meter.ts`, which calls {@link budgetPark}). */
export interface BudgetHolder {
  readonly budget: Budget | undefined;
  readonly summary: UsageSummary;
  /** Writes the raised limits to the task's usage column, durably. */
  raise(limits: { tokens?: number; usd?: number }): Promise<void>;
}

type Over = { limit: 'tokens' | 'usd'; budget: number; projected: number };

/** The error the refused call throws: it parks the step (see `run/step-ask.ts`). */
export function budgetPark(meter: BudgetHolder, step: string, over: Over, ask: ApprovalOptions): Error {
  const e = new Error(`The model call of step "${step}" waits for a person to raise the task's ${over.limit} budget.`);
  const park: StepPark = async (run, c) => {
    const budget = meter.budget ?? {};
    const spent = meter.summary.total;
    const payload: BudgetPayload = {
      step,
      limit: over.limit,
      budget: { ...(budget.tokens !== undefined ? { tokens: budget.tokens } : {}), ...(budget.usd !== undefined ? { usd: budget.usd } : {}) },
      spent: { tokens: spent.totalTokens, usd: spent.costUsd },
      projected: over.projected,
    };
    const { decision, consume } = await stepAsk(run, c, {
      purpose: 'budget',
      callKey: `${ASK_PREFIX.budget}${c.stepId}@${run.task.retries}:${spent.attempts}`,
      name: `budget:${c.stepId}`,
      options: { ...askOptions(ask), payload },
      fields: { attempts: c.attempt - 1, startedAt: c.firstStart },
      resume: false,
    });
    const parsed = decision.approved ? parseBudget(decision.data, payload) : null;
    if (!parsed?.ok) {
      const why = parsed ? ` (the decision could not be applied: ${parsed.problem})` : '';
      throw run.fail(new BudgetExceededError(run.taskId, step, over.limit, over.budget, over.projected, why));
    }
    await meter.raise(parsed.value);
    const now = run.deps.clock.now();
    await run.writer.checkpoint(
      journalRow(run, c.seq, c.stepId, 'step', {
        status: 'retrying',
        attempts: c.attempt - 1,
        startedAt: c.firstStart,
        wakeAt: now,
        error: c.lastError ? encodeError(c.lastError) : null,
      }),
      consume,
    );
  };
  (e as { [PARK_ON_STEP]?: StepPark })[PARK_ON_STEP] = park;
  return e;
}
