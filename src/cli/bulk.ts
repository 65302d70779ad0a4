/**
 * @module cli/bulk
 * `stepwise bulk <action> [filters]`: one command on every task the filters match (the filters of
 * `stepwise ls`). Without `--yes` it only counts (a dry run) and says how to go on, so that a
 * mistyped filter never cancels or deletes anything.
 */
import { BULK_ACTIONS, InvalidArgumentError, type BulkAction } from '../index.ts';
import { by, int, need, str, withEngine, type CommandContext } from './context.ts';
import { searchFlags, statusFlag } from './search-options.ts';
import { moduleFlag } from './drift.ts';

export async function bulk(ctx: CommandContext): Promise<void> {
  const action = need(ctx, 0, `action (stepwise bulk <${BULK_ACTIONS.join('|')}> [filters] [--yes])`) as BulkAction;
  if (!BULK_ACTIONS.includes(action)) throw new InvalidArgumentError(`stepwise bulk: unknown action "${action}" (one of ${BULK_ACTIONS.join(', ')}).`);
  const statuses = statusFlag(ctx);
  const filter = {
    ...(statuses ? { status: statuses } : {}),
    ...(str(ctx.options, 'workflow') ? { workflow: str(ctx.options, 'workflow') as string } : {}),
    ...(str(ctx.options, 'parent') ? { parent: str(ctx.options, 'parent') as string } : {}),
    ...searchFlags(ctx, Date.now()),
  };
  const yes = ctx.options.yes === true;
  const limit = int(ctx, 'limit');
  const reason = str(ctx.options, 'reason');
  const fromStep = str(ctx.options, 'from-step');
  const compensate = ctx.options.compensate === true;
  // `--from-step first-drift` replays each task against this code.
  const workflows = await moduleFlag(ctx);
  await withEngine(
    ctx,
    async (engine) => {
      const r = await engine.bulk({
        action,
        filter,
        dryRun: !yes,
        ...by(ctx),
        ...(limit !== undefined ? { limit } : {}),
        ...(reason !== undefined ? { reason } : {}),
        ...(fromStep !== undefined ? { fromStep } : {}),
        ...(compensate ? { compensate } : {}),
      });
      if (ctx.json) return ctx.out(JSON.stringify(r));
      const more = r.truncated ? ` (more matched: the first ${r.matched} only; --limit N for more)` : '';
      if (r.dryRun) {
        ctx.out(`${r.matched} task(s) match; ${action} would apply to ${r.acted}${r.skippedCount ? `, not to ${r.skippedCount} (${skipReasons(r.skipped)})` : ''}${more}.`);
        if (r.acted) ctx.out(`Nothing was changed. Run again with --yes to ${action} them.`);
        return;
      }
      ctx.out(
        `${action}: ${r.acted} of ${r.matched} task(s)${r.skippedCount ? `, ${r.skippedCount} skipped (${skipReasons(r.skipped)})` : ''}${r.failedCount ? `, ${r.failedCount} failed` : ''}${more}.`,
      );
      for (const f of r.failed) ctx.out(`  ${f.id}: [${f.code}] ${f.message}`);
      if (r.failedCount) process.exitCode = 1;
    },
    false,
    workflows,
  );
}

/** Why tasks were skipped, as listed (their status, unless a reason says otherwise). */
function skipReasons(skipped: ReadonlyArray<{ reason?: string }>): string {
  const reasons = [...new Set(skipped.map((s) => s.reason ?? 'their status'))];
  return reasons.join('; ');
}
