/**
 * @module primitives/patched
 * `ctx.patched(id)`: a marker for a change of code made in place, without a new workflow version.
 * New code branches on it: `if (await ctx.patched('add-fact-check')) { …new steps… }`.
 *
 * - A task that reaches the marker on new code (no journal row at its position yet) records it
 *   (a completed journal row `patch:<id>`) and gets true; every replay of that task gets true again.
 * - A task whose journal was recorded before the change has another call at that position: the
 *   marker takes no position and answers false, so the old code path replays as it ran.
 *
 * Once every task recorded before the change has ended, the branch and the marker can go.
 */
import { InvalidArgumentError } from '../errors.ts';
import type { Run } from '../run/run.ts';
import { step } from './step.ts';

/** The prefix of the marker's journal row; `patch:<id>#2` for its second call in a run. */
export const PATCH_PREFIX = 'patch:';

export async function patched(run: Run, id: string): Promise<boolean> {
  if (typeof id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/.test(id)) {
    throw run.fail(new InvalidArgumentError(`ctx.patched(${JSON.stringify(id)}): the id must be 1-100 letters, digits, ".", "_", ":" or "-", starting with a letter or digit.`));
  }
  const name = `${PATCH_PREFIX}${id}`;
  const next = run.nextRecorded();
  if (next && next.name !== name && !next.name.startsWith(`${name}#`)) return false;
  await step(run, name, () => true);
  return true;
}
