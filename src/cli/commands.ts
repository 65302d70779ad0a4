/**
 * @module cli/commands
 * One function per CLI command. Each uses only the public library API.
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, formatMs, toMs, type DeletableStatus, type Engine } from '../index.ts';
import { by, int, keyOption, listFlag, need, parseJson, str, withEngine, type CommandContext } from './context.ts';
import { bold, colorStatus, dim, time } from './style.ts';
import { taskDetail, taskTable } from './format.ts';
import { LiveBlock, taskItem, usageSoFar } from './live.ts';
import { keyedStartOptions } from './start-options.ts';
import { searchFlags, statusFlag, tagFlags } from './search-options.ts';
import { readTree, treeLines } from './tree.ts';
import { moduleFlag } from './drift.ts';

export async function start(ctx: CommandContext): Promise<void> {
  const name = need(ctx, 0, 'workflow name (stepwise start <workflow> --input JSON)');
  if (str(ctx.options, 'inputs') !== undefined) return startMany(ctx, name);
  const input = parseJson(str(ctx.options, 'input'), '--input');
  const key = keyOption(ctx);
  const keyed = keyedStartOptions(ctx);
  await withEngine(ctx, async (engine) => {
    const res = await engine.start(name, input, { ...by(ctx), ...(key !== undefined ? { idempotencyKey: key } : {}), ...keyed });
    if (ctx.json && !ctx.options.wait) return ctx.out(JSON.stringify(res));
    if (!ctx.json) ctx.out(startedLine(res, name, key, keyed));
    if (ctx.options.wait) await follow(ctx, engine, res.id);
  });
}

/** What `start` says: started, or which existing task answered (its key, a debounce, a singleton). */
function startedLine(res: { id: string; created: boolean; status: string }, name: string, key: string | undefined, keyed: ReturnType<typeof keyedStartOptions>): string {
  if (res.created) return `Started ${res.id} (${name})${keyed.debounce ? `, due in ${keyed.debounce.period} unless another start of key ${keyed.debounce.key} comes first` : ''}`;
  if (key !== undefined) return `Task ${res.id} already exists for key ${key} (${res.status})`;
  if (keyed.debounce) return `Debounced into ${res.id} (key ${keyed.debounce.key}): it now has this input and is due in ${keyed.debounce.period}`;
  return `Joined ${res.id}, the live task of singleton key ${typeof keyed.singleton === 'object' ? keyed.singleton.key : ''} (${res.status})`;
}

/**
 * `start <workflow> --inputs FILE.jsonl`: one task per non-empty line (the line is its input, JSON),
 * all started by one `startMany` call. Every line is parsed before anything is started.
 */
async function startMany(ctx: CommandContext, name: string): Promise<void> {
  const file = str(ctx.options, 'inputs') as string;
  const single = ['input', 'key', 'wait', 'title', 'debounce', 'period', 'max-wait', 'singleton', 'join', 'priority'].filter((f) => ctx.options[f] !== undefined);
  if (single.length) {
    throw new InvalidArgumentError(
      `--inputs starts one task per line: it does not combine with ${single.map((f) => `--${f}`).join(', ')} (use --key-field for keys; start debounced or singleton tasks one by one).`,
    );
  }
  const keyField = str(ctx.options, 'key-field');
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw new InvalidArgumentError(`--inputs: cannot read ${file === '-' ? 'standard input' : file}: ${(e as Error).message}`);
  }
  const items = text.split('\n').flatMap((line, i) => {
    if (!line.trim()) return [];
    let input: unknown;
    try {
      input = JSON.parse(line);
    } catch (e) {
      throw new InvalidArgumentError(`--inputs: line ${i + 1} is not valid JSON: ${(e as Error).message}. Nothing was started.`);
    }
    if (keyField === undefined) return [{ workflow: name, input, ...by(ctx) }];
    const key = typeof input === 'object' && input !== null ? (input as Record<string, unknown>)[keyField] : undefined;
    if ((typeof key !== 'string' || !key) && typeof key !== 'number') {
      throw new InvalidArgumentError(`--inputs: line ${i + 1} has no "${keyField}" (a string or number) to take its idempotency key from (--key-field). Nothing was started.`);
    }
    return [{ workflow: name, input, idempotencyKey: String(key), ...by(ctx) }];
  });
  if (!items.length) throw new InvalidArgumentError(`--inputs: ${file === '-' ? 'standard input' : file} has no lines: nothing to start.`);
  await withEngine(ctx, async (engine) => {
    const handles = await engine.startMany(items);
    if (ctx.json) return ctx.out(JSON.stringify(handles));
    const created = handles.filter((h) => h.created).length;
    for (const h of handles) ctx.out(`${h.id} ${h.created ? 'started' : 'exists'}`);
    ctx.out(`Started ${created} task${created === 1 ? '' : 's'} of ${name}${created < handles.length ? ` (${handles.length - created} already existed for their keys)` : ''}`);
  });
}

/** Live progress: prints each step and transition as it happens, until the task finishes. */
async function follow(ctx: CommandContext, engine: Engine, id: string): Promise<void> {
  const seenSteps = new Map<number, string>();
  let seenHistory = 0;
  // On a terminal, the running task is one live line: spinner, time since its last step ended,
  // and the progress its step reports (a bar for done/total, the note).
  const block = new LiveBlock(ctx.stdout ?? { write: (text: string) => ctx.out(text.replace(/\n$/, '')) }, { tty: !ctx.json && ctx.stdout?.isTTY === true });
  const out = (line: string): void => (block.live ? block.log(line) : ctx.out(line));
  let since = Date.now();
  for (;;) {
    const t = await engine.get(id);
    for (const h of t.history.slice(seenHistory)) {
      if (!ctx.json && h.type === 'transition') out(`${dim(time(h.at))} ${bold(h.event)} → ${colorStatus(h.to)}${h.actor.kind === 'worker' ? dim(` (${h.actor.id})`) : ''}`);
    }
    seenHistory = t.history.length;
    for (const s of t.steps) {
      const key = `${s.status}:${s.attempts}`;
      if (seenSteps.get(s.seq) === key) continue;
      seenSteps.set(s.seq, key);
      since = Math.max(since, s.finishedAt ?? 0);
      const u = t.usage?.steps[s.name];
      if (!ctx.json)
        out(
          `${dim(time(s.finishedAt ?? s.startedAt))}   step ${bold(s.name)} ${colorStatus(s.status)}${s.durationMs !== null ? ` in ${formatMs(s.durationMs)}` : ''}${u ? ` ${dim(usageSoFar(u))}` : ''}`,
        );
    }
    if (t.status === 'running' || t.status === 'cancelling') {
      block.set('task', taskItem(t, since));
    } else block.remove('task');
    if (t.status === 'succeeded' || t.status === 'failed' || t.status === 'cancelled') {
      block.stop();
      if (ctx.json) ctx.out(JSON.stringify(t));
      else if (t.status === 'succeeded') ctx.out(`output: ${JSON.stringify(t.output)}`);
      else if (t.status === 'failed') ctx.out(`error: ${t.error.message}`);
      if (t.status !== 'succeeded') process.exitCode = 1;
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function ls(ctx: CommandContext): Promise<void> {
  const statuses = statusFlag(ctx);
  await withEngine(ctx, async (engine) => {
    const page = await engine.list({
      ...(statuses ? { status: statuses } : {}),
      ...(str(ctx.options, 'workflow') ? { workflow: str(ctx.options, 'workflow') } : {}),
      ...(str(ctx.options, 'parent') ? { parent: str(ctx.options, 'parent') } : {}),
      ...(int(ctx, 'limit') ? { limit: int(ctx, 'limit') } : {}),
      ...(str(ctx.options, 'cursor') ? { cursor: str(ctx.options, 'cursor') } : {}),
      ...searchFlags(ctx, Date.now()),
    });
    if (ctx.json) return ctx.out(JSON.stringify(page));
    ctx.out(taskTable(page.tasks));
    if (page.nextCursor) ctx.out(dim(`more: stepwise ls --cursor ${page.nextCursor}`));
  });
}

export async function show(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise show <id>)');
  await withEngine(ctx, async (engine) => {
    const t = await engine.get(id);
    if (ctx.json) return ctx.out(JSON.stringify(t));
    ctx.out([taskDetail(t), ...treeLines(t, await readTree(engine, t))].join('\n'));
  });
}

export async function explain(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise explain <id>)');
  await withEngine(ctx, async (engine) => {
    const e = await engine.explain(id);
    if (ctx.json) return ctx.out(JSON.stringify(e));
    ctx.out(`${bold(e.id)} ${colorStatus(e.status)}\n  ${e.summary}`);
    ctx.out(`  legal events: ${e.legalEvents.join(', ') || 'none'}`);
    if (e.machine) ctx.out(`  state: ${e.machine.state}; takes ${e.machine.legalEvents.join(', ') || 'no event now'}`);
    if (e.lease) ctx.out(`  lease: ${e.lease.owner} until ${time(e.lease.expiresAt)}${e.lease.expired ? ' (expired)' : ''}`);
    if (e.lastStep) ctx.out(`  last step: ${e.lastStep.name} ${e.lastStep.status} after ${e.lastStep.attempts} attempt(s)${e.lastStep.error ? `: ${e.lastStep.error}` : ''}`);
  });
}

function command(run: (engine: Engine, id: string, ctx: CommandContext) => Promise<{ id: string; status: string }>, verb: string) {
  return async (ctx: CommandContext): Promise<void> => {
    const id = need(ctx, 0, `task id (stepwise ${verb} <id>)`);
    await withEngine(ctx, async (engine) => {
      const t = await run(engine, id, ctx);
      ctx.out(ctx.json ? JSON.stringify(t) : `${t.id} → ${colorStatus(t.status)}`);
    });
  };
}

export const cancel = command((e, id, ctx) => e.cancel(id, { ...by(ctx), ...(str(ctx.options, 'reason') ? { reason: str(ctx.options, 'reason') } : {}) }), 'cancel');
export async function retry(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise retry <id> [--from-step S|first-drift --module M] [--compensate])');
  const fromStep = str(ctx.options, 'from-step');
  const compensate = ctx.options.compensate === true;
  const workflows = await moduleFlag(ctx);
  await withEngine(
    ctx,
    async (engine) => {
      const t = await engine.retry(id, { ...by(ctx), ...(fromStep !== undefined ? { fromStep } : {}), ...(compensate ? { compensate } : {}) });
      ctx.out(ctx.json ? JSON.stringify(t) : `${t.id} → ${colorStatus(t.status)}`);
    },
    false,
    workflows,
  );
}
export async function fork(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise fork <id> [--from-step S] [--input JSON])');
  const fromStep = str(ctx.options, 'from-step');
  const input = str(ctx.options, 'input');
  const tags = tagFlags(ctx, 'fork');
  const title = str(ctx.options, 'title');
  const workflows = await moduleFlag(ctx);
  await withEngine(
    ctx,
    async (engine) => {
      const f = await engine.fork(id, {
        ...by(ctx),
        ...(fromStep !== undefined ? { fromStep } : {}),
        ...(input !== undefined ? { input: parseJson(input, '--input') } : {}),
        ...(tags ? { tags } : {}),
        ...(title !== undefined ? { title } : {}),
      });
      ctx.out(ctx.json ? JSON.stringify(f) : `Forked ${id}${fromStep ? ` from step ${fromStep}` : ''} → ${f.id} (${colorStatus(f.status)})`);
    },
    false,
    workflows,
  );
}

export const pause = command((e, id, ctx) => e.pause(id, { ...by(ctx), ...(ctx.options.subtree === true ? { subtree: true } : {}) }), 'pause');
export const resume = command((e, id, ctx) => e.resume(id, { ...by(ctx), ...(ctx.options.subtree === true ? { subtree: true } : {}) }), 'resume');

export async function deleteTask(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise delete <id>)');
  await withEngine(ctx, async (engine) => {
    const t = await engine.delete(id, by(ctx));
    ctx.out(ctx.json ? JSON.stringify({ deleted: t }) : `Deleted ${t.id} (${t.workflow}, ${colorStatus(t.status)})`);
  });
}

export async function purge(ctx: CommandContext): Promise<void> {
  const olderThan = str(ctx.options, 'older-than');
  if (olderThan === undefined) throw new InvalidArgumentError("purge needs --older-than: how long ago the tasks must have finished ('30d'; 0 for every finished task).");
  const statuses = listFlag(ctx, 'status');
  const workflows = listFlag(ctx, 'workflow');
  const dryRun = ctx.options['dry-run'] === true;
  await withEngine(ctx, async (engine) => {
    const r = await engine.purge({
      olderThan,
      dryRun,
      ...by(ctx),
      ...(statuses ? { status: statuses as DeletableStatus[] } : {}),
      ...(workflows ? { workflow: workflows } : {}),
      ...(int(ctx, 'limit') !== undefined ? { limit: int(ctx, 'limit') } : {}),
    });
    if (ctx.json) return ctx.out(JSON.stringify(r));
    const parts = (['succeeded', 'failed', 'cancelled'] as const).filter((s) => r.byStatus[s]).map((s) => `${r.byStatus[s]} ${s}`);
    const what = `${r.count} finished task${r.count === 1 ? '' : 's'}${parts.length ? ` (${parts.join(', ')})` : ''}`;
    ctx.out(dryRun ? `Would delete ${what}${toMs(olderThan) > 0 ? ` that ended at least ${olderThan} ago` : ''}.` : `Deleted ${what}.`);
  });
}

export async function signal(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise signal <id> <name> [--data JSON])');
  const name = need(ctx, 1, 'signal name (stepwise signal <id> <name> [--data JSON])');
  const data = parseJson(str(ctx.options, 'data'), '--data');
  const key = keyOption(ctx);
  await withEngine(ctx, async (engine) => {
    const res = await engine.signal(id, name, data, {
      ...by(ctx),
      ...(key !== undefined ? { idempotencyKey: key } : {}),
      ...(ctx.options['require-waiting'] === true ? { requireWaiting: true } : {}),
    });
    const where = res.delivered === 'waiting' ? 'the task was waiting for it' : res.delivered === 'consumed' ? 'already received' : 'queued until a wait receives it';
    ctx.out(ctx.json ? JSON.stringify(res) : res.created ? `Sent "${name}" to ${id} (${where})` : `Already sent (key ${key}; ${where})`);
  });
}

export async function send(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise send <id> <event> [--data JSON])');
  const event = need(ctx, 1, 'event name (stepwise send <id> <event> [--data JSON])');
  const data = parseJson(str(ctx.options, 'data'), '--data');
  const key = keyOption(ctx);
  await withEngine(ctx, async (engine) => {
    const res = await engine.send(id, event, data, { ...by(ctx), ...(key !== undefined ? { idempotencyKey: key } : {}) });
    if (ctx.json) return ctx.out(JSON.stringify(res));
    ctx.out(
      res.created
        ? `Sent "${event}" to ${id}${res.state ? ` in state ${res.state}` : ''}`
        : `Already sent (key ${key}; ${res.delivered === 'consumed' ? 'the machine has taken it' : 'the machine is taking it'})`,
    );
  });
}

export async function migrate(ctx: CommandContext): Promise<void> {
  await withEngine(
    ctx,
    async (engine) => {
      await engine.ready();
      ctx.out(ctx.json ? JSON.stringify({ migrated: true, db: ctx.db }) : `Schema is up to date in ${ctx.db}`);
    },
    true,
  );
}
