/**
 * @module cli/alerts
 * `stepwise alerts`: the alerts workers raised, newest first (`engine.alerts`). Uses only the
 * public library API.
 */
import type { AlertKind } from '../index.ts';
import { int, listFlag, str, withEngine, type CommandContext } from './context.ts';
import { bold, dim, table, time } from './style.ts';

export async function alerts(ctx: CommandContext): Promise<void> {
  const kind = listFlag(ctx, 'kind') as AlertKind[] | undefined;
  const workflow = str(ctx.options, 'workflow');
  const task = str(ctx.options, 'task');
  const limit = int(ctx, 'limit');
  const before = str(ctx.options, 'cursor');
  await withEngine(ctx, async (engine) => {
    const list = await engine.alerts({
      ...(kind ? { kind } : {}),
      ...(workflow !== undefined ? { workflow } : {}),
      ...(task !== undefined ? { taskId: task } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(before !== undefined ? { before } : {}),
    });
    if (ctx.json) return ctx.out(JSON.stringify(list));
    if (!list.length) return ctx.out(dim('(no alerts; workers raise them when the engine has `alerts` set)'));
    ctx.out(
      table(
        ['RAISED', 'KIND', 'ABOUT', 'MESSAGE'],
        list.map((a) => [time(a.at), bold(a.kind), a.taskId ?? a.workflow ?? a.subject, a.message]),
      ),
    );
    if (list.length === (limit ?? 100)) ctx.out(dim(`older: stepwise alerts --cursor ${list.at(-1)!.id}`));
  });
}
