/**
 * @module run/run-of
 * Internal: not part of the public API (the package exports only its index modules).
 * The run behind a workflow context, for engine modules that extend `ctx` from outside the core
 * (`stepwise-engine/ai` records model usage on the run's task). Kept under a symbol the public
 * types do not mention, so workflow code cannot reach the run's internals by accident.
 */
import type { RunCore } from './core.ts';

export const RUN_OF: unique symbol = Symbol.for('stepwise.run-of') as never;

/** The run of `ctx`, or undefined for an object that is not a workflow context of this engine. */
export function runOf(ctx: object): RunCore | undefined {
  return (ctx as { [RUN_OF]?: RunCore })[RUN_OF];
}
