/**
 * @module primitives/tags
 * `ctx.setTags(tags)`: tags the run learns (the tenant of a request it parsed, the model it chose),
 * merged into the task's tags so that `list({ tags })` finds it; a null value removes a tag.
 * Written at once while the run holds its lease, without a journal row: a replay that asks for
 * tags the task already has writes nothing. A run that lost its lease writes nothing (its successor will).
 */
import { InvalidArgumentError } from '../errors.ts';
import { TAGS_MAX, checkTags } from '../api/tags.ts';
import type { Run } from '../run/run.ts';

/**
 * The tags a run's task has as far as the run knows (its row's at claim, then its own changes), as
 * the row's text, with the epoch they were written at: a run resumed under a new claim (see
 * `run/resume.ts`) has its task's row as that claim read it.
 */
const known = new WeakMap<Run, { epoch: number; tags: string | null }>();

export function tagsOf(run: Run): string | null {
  const k = known.get(run);
  return k && k.epoch === run.epoch ? k.tags : run.task.tags;
}

export async function setTags(run: Run, tags: Readonly<Record<string, string | null>>): Promise<Record<string, string>> {
  let checked: Record<string, string | null>;
  try {
    checked = checkTags(tags, 'ctx.setTags()', true);
  } catch (e) {
    throw run.fail(e as Error);
  }
  const set: Record<string, string> = {};
  const remove: string[] = [];
  for (const [key, value] of Object.entries(checked)) {
    if (value === null) remove.push(key);
    else set[key] = value;
  }
  // A replay asks for what its run already wrote: no write.
  const had = tagsOf(run);
  const current = had ? (JSON.parse(had) as Record<string, string>) : {};
  if (Object.entries(set).every(([k, v]) => current[k] === v) && remove.every((k) => !(k in current))) return current;
  const after = await run.deps.store.setTags(run.taskId, { set, remove, epoch: run.epoch, max: TAGS_MAX });
  if (after === 'too-many') throw run.fail(new InvalidArgumentError(`ctx.setTags(): a task has at most ${TAGS_MAX} tags; remove some (a null value removes a tag) before adding others.`));
  if (after === null) return { ...set };
  known.set(run, { epoch: run.epoch, tags: Object.keys(after).length ? JSON.stringify(after) : null });
  return after;
}
