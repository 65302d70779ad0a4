/**
 * @module commands/fork
 * `engine.fork(id, { fromStep, input })`: a new task of the same workflow and version that starts
 * with the source task's journal up to `fromStep` (the calls before it, as they were recorded) and
 * runs from there on its own: to try another input, a fixed prompt, or a different decision,
 * without touching the original. The fork records its lineage (`forkedFrom`) and its first log
 * entry names the source and the step.
 */
import { FORK_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { resolveFromStep } from '../replay/drift.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { StepRow } from '../store.ts';
import { planRetryFrom, forgetUndone, undoneSteps } from '../failure/retry-from.ts';
import { isCleanupSeq } from '../run/cleanup-scope.ts';
import { decodeJson } from '../serialize.ts';
import { planStart } from '../start-plan.ts';
import { taskRow } from './context.ts';
import type { ForkOptions, StartResult } from './options.ts';
import { startContext, type StartDeps } from './start.ts';

/** The source's journal rows a fork copies: the code's calls before `fromStep` with a recorded result, but those its cleanup undid. */
export function forkedRows(steps: readonly StepRow[], fromStep: string | undefined, taskId: string): StepRow[] {
  if (fromStep === undefined) return [];
  const journal = steps.filter((s) => !isCleanupSeq(s.seq));
  const later = new Set(planRetryFrom(journal, fromStep, taskId).deleteSteps);
  const cleanup = steps.filter((s) => isCleanupSeq(s.seq));
  const undone = forgetUndone(journal, undoneSteps(journal, cleanup));
  return journal.filter((s) => !later.has(s.seq) && !undone.has(s.seq) && (s.status === 'completed' || s.status === 'failed'));
}

export async function forkTask(deps: StartDeps, id: string, options: ForkOptions): Promise<StartResult> {
  const { ctx } = deps;
  checkOptionKeys(options, FORK_OPTIONS, 'engine.fork()');
  if (options.fromStep !== undefined && (typeof options.fromStep !== 'string' || !options.fromStep)) {
    throw new InvalidArgumentError('engine.fork(): fromStep must be the name of a step of the task (its id: `name`, or `name#2` for its second call).');
  }
  const store = await ctx.open();
  const source = await taskRow(store, id);
  const fromStep = await resolveFromStep(ctx, id, options.fromStep, 'engine.fork()');
  const copies = forkedRows(await store.getSteps(id), fromStep, id);
  const input = 'input' in options ? options.input : decodeJson(source.input);
  const sourceTags = source.tags ? (JSON.parse(source.tags) as Record<string, string>) : {};
  const planned = await planStart(startContext(ctx, store), source.workflow, input, {
    ...(options.by !== undefined ? { by: options.by } : {}),
    tags: { ...sourceTags, ...options.tags },
    title: options.title ?? source.title ?? undefined,
    priority: source.priority,
  });
  const log = JSON.parse(planned.task.log.data ?? '{}') as Record<string, unknown>;
  const task = {
    ...planned.task,
    // The journal copied is the source's version's: the fork runs on that version's code.
    workflowVersion: source.workflowVersion,
    forkedFrom: source.id,
    log: { ...planned.task.log, data: JSON.stringify({ ...log, detail: { forkedFrom: source.id, fromStep: fromStep ?? null, copied: copies.map((s) => s.name) } }) },
  };
  // Told to this process's workers and announced to others as a start is.
  const { task: row } = await deps.batcher(store).insertAlone(task, async (notify) => ({
    task: await store.forkTask(
      { ...task, ...(notify ? { notify } : {}) },
      copies.map((s) => s.seq),
    ),
    created: true,
  }));
  return { id: row.id, workflow: row.workflow, status: row.status, created: true };
}
