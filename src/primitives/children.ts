/**
 * @module primitives/children
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.children(workflow, inputs, { concurrency })`: one child task per input, at most
 * `concurrency` started and not ended at once. A pool of `concurrency` lanes in the workflow's
 * code, each starting its next child when its last one ended: the calls are the parent's durable
 * calls (`child.ts`), so a replay makes them in the order the journal recorded. Starts made in the
 * same moment are written in one statement by the engine's start batcher.
 */
import { InvalidArgumentError } from '../errors.ts';
import type { ChildrenOptions } from '../api/child.ts';
import type { Workflow } from '../workflow.ts';
import type { Run } from '../run/run.ts';
import { child } from './child.ts';

export async function children(
  run: Run,
  engine: object | undefined,
  workflow: string | Workflow<unknown, unknown, unknown>,
  inputs: readonly unknown[],
  options: ChildrenOptions = {},
): Promise<unknown[]> {
  if (!Array.isArray(inputs)) throw run.fail(new InvalidArgumentError('ctx.children(workflow, inputs): inputs must be an array (one input per child).'));
  const { concurrency = inputs.length, ...each } = options ?? {};
  if (!Number.isSafeInteger(concurrency) || concurrency < 0 || (concurrency === 0 && inputs.length > 0)) {
    throw run.fail(new InvalidArgumentError(`ctx.children(): concurrency must be a whole number ≥ 1, got ${String(concurrency)}.`));
  }
  const results = new Array<unknown>(inputs.length);
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < inputs.length) {
      const i = next++;
      try {
        results[i] = await child(run, engine, workflow, inputs[i], each);
      } catch (e) {
        failed = true; // no lane starts another child
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, inputs.length) }, lane));
  return results;
}
