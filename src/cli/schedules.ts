/**
 * @module cli/schedules
 * `stepwise schedules [ls | show | create | pause | resume | trigger | delete]`: the schedules of a
 * store, over `engine.schedules` (the public API only).
 */
import { InvalidArgumentError, type ScheduleInfo, type ScheduleOptions, type ScheduleOverlap } from '../index.ts';
import { need, parseJson, str, withEngine, type CommandContext } from './context.ts';
import { bold, dim, table, time } from './style.ts';

const VERBS = ['ls', 'show', 'create', 'pause', 'resume', 'trigger', 'delete'] as const;

function lines(s: ScheduleInfo): string {
  return [
    `${bold(s.id)}  ${s.workflow}  ${s.paused ? 'paused' : 'active'}${s.source === 'workflow' ? dim('  (declared with the workflow)') : ''}`,
    `  cron      ${s.cron}  ${dim(s.timezone)}   overlap ${s.overlap}   catch-up ${s.catchupMs} ms`,
    `  next run  ${time(s.nextRunAt)}   last run ${time(s.lastRunAt)}${s.lastTaskId ? `  task ${s.lastTaskId}` : ''}${s.skipped ? `   skipped ${s.skipped}` : ''}`,
    ...(s.bufferedAt !== null ? [`  waiting   the tick of ${time(s.bufferedAt)} (overlap: buffer)`] : []),
  ].join('\n');
}

export async function schedules(ctx: CommandContext): Promise<void> {
  const [verb = 'ls', ...rest] = ctx.args;
  if (!(VERBS as readonly string[]).includes(verb)) throw new InvalidArgumentError(`stepwise schedules: unknown subcommand "${verb}" (known: ${VERBS.join(', ')}).`);
  const sub: CommandContext = { ...ctx, args: rest };
  await withEngine(ctx, async (engine) => {
    const s = engine.schedules;
    const show = (info: object & Partial<ScheduleInfo>): void => ctx.out(ctx.json ? JSON.stringify(info) : lines(info as ScheduleInfo));
    switch (verb) {
      case 'ls': {
        const list = await s.list({ ...(str(ctx.options, 'workflow') ? { workflow: str(ctx.options, 'workflow') } : {}) });
        if (ctx.json) return ctx.out(JSON.stringify(list));
        if (!list.length) return ctx.out(dim('(no schedules)'));
        return ctx.out(
          table(
            ['ID', 'WORKFLOW', 'CRON', 'ZONE', 'NEXT RUN', 'LAST RUN', 'STATE'],
            list.map((x) => [x.id, x.workflow, x.cron, x.timezone, time(x.nextRunAt), time(x.lastRunAt), x.paused ? 'paused' : 'active']),
          ),
        );
      }
      case 'show':
        return show(await s.get(need(sub, 0, 'a schedule id')));
      case 'create':
        return show(await s.create(createOptions(sub)));
      case 'pause':
        return show(await s.pause(need(sub, 0, 'a schedule id')));
      case 'resume':
        return show(await s.resume(need(sub, 0, 'a schedule id')));
      case 'trigger': {
        const { taskId } = await s.trigger(need(sub, 0, 'a schedule id'));
        return ctx.out(ctx.json ? JSON.stringify({ taskId }) : `started task ${taskId}`);
      }
      case 'delete': {
        const id = need(sub, 0, 'a schedule id');
        const { deleted } = await s.delete(id);
        if (!deleted) await s.get(id); // NOT_FOUND with its message
        return ctx.out(ctx.json ? JSON.stringify({ deleted }) : `deleted schedule ${id}`);
      }
    }
  });
}

/** `create <id> --workflow W --cron C [--timezone Z] [--input JSON] [--overlap O] [--catchup D|none] [--paused]`. */
function createOptions(ctx: CommandContext): ScheduleOptions {
  const workflow = str(ctx.options, 'workflow');
  const cron = str(ctx.options, 'cron');
  if (!workflow || !cron) throw new InvalidArgumentError('stepwise schedules create <id> needs --workflow W and --cron "EXPR" (for example --cron "0 6 * * *").');
  const catchup = str(ctx.options, 'catchup');
  const input = str(ctx.options, 'input');
  return {
    id: need(ctx, 0, 'a schedule id'),
    workflow,
    cron,
    ...(str(ctx.options, 'timezone') ? { timezone: str(ctx.options, 'timezone') } : {}),
    ...(input !== undefined ? { input: parseJson(input, '--input') } : {}),
    ...(str(ctx.options, 'overlap') ? { overlap: str(ctx.options, 'overlap') as ScheduleOverlap } : {}),
    ...(catchup !== undefined ? { catchup: catchup === 'none' ? false : /^\d+$/.test(catchup) ? Number(catchup) : catchup } : {}),
    ...(ctx.options.paused === true ? { paused: true } : {}),
  };
}
