/**
 * @module cli/start-options
 * The flags of `stepwise start` that become start options besides the input and the key: `--title`,
 * `--priority N`, `--tag k=v`, `--debounce KEY --period D [--max-wait D]` and `--singleton KEY [--join]`. The engine checks the
 * values; here only flags that make no sense alone are refused.
 */
import { InvalidArgumentError, type StartOptions } from '../index.ts';
import { str, type CommandContext } from './context.ts';
import { tagFlags } from './search-options.ts';

export function keyedStartOptions(ctx: CommandContext): Pick<StartOptions, 'title' | 'debounce' | 'singleton' | 'priority' | 'tags' | 'version'> {
  const out: Pick<StartOptions, 'title' | 'debounce' | 'singleton' | 'priority' | 'tags' | 'version'> = {};
  const tags = tagFlags(ctx, 'start');
  if (tags) out.tags = tags;
  const version = str(ctx.options, 'workflow-version');
  if (version !== undefined) out.version = version;
  const title = str(ctx.options, 'title');
  if (title !== undefined) out.title = title;
  const priority = str(ctx.options, 'priority');
  if (priority !== undefined) {
    if (!/^\d+$/.test(priority)) throw new InvalidArgumentError(`stepwise start: --priority takes a whole number 0..1000, got "${priority}".`);
    out.priority = Number(priority);
  }
  const debounce = str(ctx.options, 'debounce');
  const period = str(ctx.options, 'period');
  const maxWait = str(ctx.options, 'max-wait');
  if (debounce === undefined && (period !== undefined || maxWait !== undefined)) {
    throw new InvalidArgumentError('stepwise start: --period and --max-wait go with --debounce KEY (e.g. --debounce user-7 --period 30s).');
  }
  if (debounce !== undefined) {
    if (period === undefined) throw new InvalidArgumentError('stepwise start: --debounce KEY needs --period D (how long after the last start the task becomes due, e.g. 30s).');
    out.debounce = { key: debounce, period, ...(maxWait !== undefined ? { maxWait } : {}) };
  }
  const singleton = str(ctx.options, 'singleton');
  if (singleton === undefined && ctx.options.join) throw new InvalidArgumentError('stepwise start: --join goes with --singleton KEY.');
  if (singleton !== undefined) out.singleton = { key: singleton, mode: ctx.options.join ? 'join' : 'refuse' };
  return out;
}
