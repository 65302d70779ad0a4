/**
 * @module primitives/call-options
 * Internal: not part of the public API.
 * Refuses an option of a durable call (`ctx.step`, `ctx.forEach`, …) that the call does not know:
 * a mistyped `retries` would otherwise run the step with the default policy and say nothing. The
 * task fails at the call with INVALID_ARGUMENT naming the unknown and the known keys.
 */
import { checkOptionKeys } from '../option-keys.ts';
import type { Run } from '../run/run.ts';

export function checkCallOptions(run: Pick<Run, 'fail'>, options: unknown, known: readonly string[], where: string): void {
  try {
    checkOptionKeys(options, known, where);
  } catch (e) {
    throw run.fail(e as Error);
  }
}
