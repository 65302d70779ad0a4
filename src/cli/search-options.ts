/**
 * @module cli/search-options
 * The flags that tag and find tasks: `--tag key=value` (repeatable) on `start` and `ls`, and on
 * `ls` `--since` / `--until` (a duration back from now such as `2h`, or an ISO date),
 * `--failed-with CODE` and `--text T`. The engine checks the values; here only their shape.
 */
import { InvalidArgumentError, isTaskStatus, type ListOptions, type TaskStatus } from '../index.ts';
import { str, type CommandContext } from './context.ts';

/** `--tag k=v --tag k2=v2` as a tag map, or undefined without the flag. */
export function tagFlags(ctx: CommandContext, command: string): Record<string, string> | undefined {
  const given = ctx.options.tag;
  if (given === undefined) return undefined;
  const list = Array.isArray(given) ? given : [String(given)];
  const tags: Record<string, string> = {};
  for (const pair of list) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new InvalidArgumentError(`stepwise ${command}: --tag takes key=value (e.g. --tag tenant=acme), got "${pair}".`);
    const key = pair.slice(0, at);
    if (key in tags) throw new InvalidArgumentError(`stepwise ${command}: --tag ${key} is given twice.`);
    tags[key] = pair.slice(at + 1);
  }
  return tags;
}

/** A point in time: an ISO date, or a duration back from `now` (`90s`, `15m`, `2h`, `7d`). */
export function timeFlag(value: string, flag: string, now: number): number {
  const back = /^(\d+)(ms|s|m|h|d)$/.exec(value);
  if (back) {
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[back[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
    return now - Number(back[1]) * unit;
  }
  const at = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(at)) throw new InvalidArgumentError(`--${flag} takes a duration back from now (2h, 7d) or an ISO date (2026-12-01T09:00Z), got "${value}".`);
  return at;
}

/** The search filters of `stepwise ls`. */
export function searchFlags(ctx: CommandContext, now: number): Pick<ListOptions, 'tags' | 'createdAfter' | 'createdBefore' | 'failedWith' | 'text'> {
  const out: Pick<ListOptions, 'tags' | 'createdAfter' | 'createdBefore' | 'failedWith' | 'text'> = {};
  const tags = tagFlags(ctx, 'ls');
  if (tags) out.tags = tags;
  const since = str(ctx.options, 'since');
  if (since !== undefined) out.createdAfter = timeFlag(since, 'since', now);
  const until = str(ctx.options, 'until');
  if (until !== undefined) out.createdBefore = timeFlag(until, 'until', now);
  const failedWith = str(ctx.options, 'failed-with');
  if (failedWith !== undefined) out.failedWith = failedWith;
  const text = str(ctx.options, 'text');
  if (text !== undefined) out.text = text;
  return out;
}

/** `--status a,b` as statuses (each checked), or undefined without the flag. */
export function statusFlag(ctx: CommandContext): TaskStatus[] | undefined {
  const statuses = str(ctx.options, 'status')
    ?.split(',')
    .map((s) => s.trim());
  for (const s of statuses ?? [])
    if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown status "${s}" (pending, running, waiting, paused, cancelling, succeeded, failed, cancelled).`);
  return statuses as TaskStatus[] | undefined;
}
