/**
 * @module ai/metering/start-usage
 * Internal: not part of the public API.
 * The `usage` column a task starts with: empty, or the budget given to `engine.start()`.
 */
import { InvalidArgumentError } from '../../errors.ts';
import { checkBudget, emptySummary, type Budget } from './usage.ts';

export function startUsage(budget: Budget | undefined): string | null {
  if (budget === undefined) return null;
  try {
    checkBudget(budget, 'engine.start()');
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message, { cause: e });
  }
  return JSON.stringify({ ...emptySummary(), budget });
}
