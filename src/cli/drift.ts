/**
 * @module cli/drift
 * `stepwise drift <module> [<id>]`: the recorded model calls the code of `<module>` would make with
 * another request (a prompt, model, tools or settings changed), of one task or of the tasks the
 * list filters match (`engine.drift`), with the command that re-runs each from its first drifted
 * call. Also `--module` for `retry` and `fork` with `--from-step first-drift`. Uses only the
 * public library API.
 */
import { InvalidArgumentError, type DriftReport, type TaskDrift, type Workflow } from '../index.ts';
import { int, need, str, withEngine, type CommandContext } from './context.ts';
import { loadWorkflows } from './load-module.ts';
import { searchFlags, statusFlag } from './search-options.ts';
import { bold, dim, table } from './style.ts';

/** The list filters `drift` takes without a task id. */
const LIST_FLAGS = ['status', 'workflow', 'tag', 'since', 'until', 'failed-with', 'text', 'limit', 'cursor'] as const;

export async function drift(ctx: CommandContext): Promise<void> {
  const workflows = await loadWorkflows(need(ctx, 0, 'workflow module (stepwise drift <module> [<id>]): the code to replay the tasks against'));
  const id = ctx.args[1];
  if (id !== undefined) {
    const filters = LIST_FLAGS.filter((f) => ctx.options[f] !== undefined);
    if (filters.length) throw new InvalidArgumentError(`stepwise drift: ${filters.map((f) => `--${f}`).join(', ')} filter(s) the task list, not one task: give either a task id or filters.`);
  }
  const statuses = statusFlag(ctx);
  await withEngine(
    ctx,
    async (engine) => {
      if (id !== undefined) return printTask(ctx, await engine.drift(id));
      const workflow = str(ctx.options, 'workflow');
      const limit = int(ctx, 'limit');
      const cursor = str(ctx.options, 'cursor');
      const report = await engine.drift({
        ...(statuses ? { status: statuses } : {}),
        ...(workflow !== undefined ? { workflow } : {}),
        ...(limit !== undefined ? { limit } : {}),
        ...(cursor !== undefined ? { cursor } : {}),
        ...searchFlags(ctx, Date.now()),
      });
      printReport(ctx, report);
    },
    false,
    workflows,
  );
}

function printTask(ctx: CommandContext, d: TaskDrift): void {
  if (ctx.json) return ctx.out(JSON.stringify(d));
  if (d.firstDrift === null) return ctx.out(`${bold(d.taskId)} (${d.workflow}): no drift; every recorded model call is made the same way by this code.`);
  ctx.out(`${bold(d.taskId)} (${d.workflow}): ${d.drift.length} drifted model call(s)`);
  ctx.out(
    table(
      ['STEP', 'MODEL', 'RECORDED', 'NOW'],
      d.drift.map((c) => [c.step, c.model, c.recordedFingerprint.slice(0, 12), c.fingerprint.slice(0, 12)]),
    ),
  );
  ctx.out(dim(`re-run from the first: stepwise retry ${d.taskId} --from-step ${d.firstDrift}`));
}

function printReport(ctx: CommandContext, r: DriftReport): void {
  if (ctx.json) return ctx.out(JSON.stringify(r));
  ctx.out(`${r.checked} task(s) replayed: ${r.drifted.length} drifted, ${r.unreplayable.length} not replayable by this code.`);
  if (r.drifted.length)
    ctx.out(
      table(
        ['TASK', 'WORKFLOW', 'FIRST DRIFT', 'CALLS'],
        r.drifted.map((d) => [d.taskId, d.workflow, d.firstDrift, String(d.drift.length)]),
      ),
    );
  for (const u of r.unreplayable) ctx.out(`${bold(u.taskId)} not replayable: ${u.reason}`);
  if (r.drifted.length) ctx.out(dim('re-run one from its first drift: stepwise retry <task> --from-step <first drift>'));
  if (r.nextCursor) ctx.out(dim(`more: add --cursor ${r.nextCursor}`));
}

/** `--module FILE` of retry and fork: the workflow code `--from-step first-drift` replays against. */
export async function moduleFlag(ctx: CommandContext): Promise<Workflow[]> {
  const path = str(ctx.options, 'module');
  return path === undefined ? [] : loadWorkflows(path);
}
