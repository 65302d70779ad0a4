/**
 * @module cli/commands
 * One function per CLI command. Each uses only the public library API.
 */
import { readFileSync } from 'node:fs';
import { Engine, InvalidArgumentError, formatMs, isTaskStatus, toMs, type DeletableStatus, type Observer, type TaskStatus, type WorkerEvents } from '../index.ts';
import { bold, colorStatus, dim, taskDetail, taskTable, time } from './format.ts';
import { loadWorkflows } from './load-module.ts';
import { LiveBlock, taskItem, usageSoFar } from './live.ts';

export interface CommandContext {
  db: string;
  json: boolean;
  args: string[];
  options: Record<string, string | boolean | undefined>;
  out: (line: string) => void;
  /** The terminal, for live progress (absent or not a TTY: plain lines through `out`). */
  stdout?: { write(text: string): unknown; isTTY?: boolean; columns?: number };
}

export const str = (o: CommandContext['options'], k: string): string | undefined => (typeof o[k] === 'string' ? (o[k] as string) : undefined);

export function need(ctx: CommandContext, i: number, what: string): string {
  const v = ctx.args[i];
  if (!v) throw new InvalidArgumentError(`Missing ${what}. See \`stepwise help\`.`);
  return v;
}

/**
 * JSON given on the command line: the text itself, `@path` for a file's contents, or `-` for
 * standard input (so that large inputs need not fit on a command line).
 */
export function parseJson(text: string | undefined, what: string): unknown {
  if (text === undefined) return undefined;
  let source = text;
  if (text === '-' || text.startsWith('@')) {
    const file = text === '-' ? 0 : text.slice(1);
    try {
      source = readFileSync(file, 'utf8');
    } catch (e) {
      throw new InvalidArgumentError(`${what}: cannot read ${text === '-' ? 'standard input' : file}: ${(e as Error).message}`);
    }
  }
  try {
    return JSON.parse(source);
  } catch (e) {
    throw new InvalidArgumentError(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/** A whole number ≥ 1 (counts and milliseconds). */
function int(ctx: CommandContext, name: string): number | undefined {
  const v = str(ctx.options, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`--${name} must be a whole number ≥ 1, got "${v}"`);
  return n;
}

/** A --key value: absent, or a non-empty key (an empty one would silently start a new task each time). */
export function keyOption(ctx: CommandContext): string | undefined {
  const key = str(ctx.options, 'key');
  if (key !== undefined && !key.trim()) throw new InvalidArgumentError('--key must not be empty: give the idempotency key, or leave --key out.');
  return key;
}

/**
 * An engine on the command's store. Only `worker` and `migrate` may create a database: for every
 * other command a mistyped sqlite: path is an error, not a new empty file.
 */
export async function withEngine<T>(ctx: CommandContext, fn: (engine: Engine) => Promise<T>, create = false): Promise<T> {
  const engine = new Engine({ store: ctx.db, ...(create ? {} : { sqlite: { mustExist: true } }) });
  try {
    return await fn(engine);
  } finally {
    await engine.close();
  }
}

export async function worker(ctx: CommandContext): Promise<void> {
  const workflows = await loadWorkflows(need(ctx, 0, 'module path (stepwise worker <module>)'));
  const quiet = ctx.options.quiet === true;
  const live = !ctx.json && !quiet && ctx.stdout?.isTTY === true;
  // On a terminal, the tokens and cost each task has spent so far, summed from the model-call
  // entries of its log as this process writes them (a log reader only when there is a terminal).
  const spent = new Map<string, { totalTokens: number; costUsd: number }>();
  const spentOf = (taskId: string): { totalTokens: number; costUsd: number } => {
    let u = spent.get(taskId);
    if (!u) spent.set(taskId, (u = { totalTokens: 0, costUsd: 0 }));
    return u;
  };
  const usageObserver: Observer = {
    onEvent: (e) => {
      if (e.type !== 'usage:attempt') return;
      const u = spentOf(e.taskId);
      u.totalTokens += e.usage.inputTokens + e.usage.outputTokens;
      u.costUsd += e.usage.costUsd;
    },
  };
  const engine = new Engine({ store: ctx.db, workflows, ...(live ? { observers: [usageObserver] } : {}) });
  const only = str(ctx.options, 'workflows')?.split(',').map((s) => s.trim()).filter(Boolean);
  const w = engine.worker({
    ...(int(ctx, 'concurrency') !== undefined ? { concurrency: int(ctx, 'concurrency') } : {}),
    ...(int(ctx, 'claim-batch') !== undefined ? { claimBatch: int(ctx, 'claim-batch') } : {}),
    ...(int(ctx, 'lease-ms') !== undefined ? { leaseMs: int(ctx, 'lease-ms') } : {}),
    ...(int(ctx, 'heartbeat-ms') !== undefined ? { heartbeatMs: int(ctx, 'heartbeat-ms') } : {}),
    ...(int(ctx, 'poll-ms') !== undefined ? { pollIntervalMs: int(ctx, 'poll-ms') } : {}),
    ...(int(ctx, 'grace-ms') !== undefined ? { shutdownGraceMs: int(ctx, 'grace-ms') } : {}),
    ...(str(ctx.options, 'worker-id') ? { workerId: str(ctx.options, 'worker-id') } : {}),
    ...(only?.length ? { workflows: only } : {}),
  });
  // On a terminal, steps in flight are a live block (spinner, elapsed time, the task's tokens so
  // far) and a step's start is not printed as its own line; elsewhere every event is one plain line.
  const block = new LiveBlock(ctx.stdout ?? { write: (text: string) => ctx.out(text.replace(/\n$/, '')) }, { tty: live });
  const log = <K extends keyof WorkerEvents>(name: K, payload: WorkerEvents[K]): void => {
    if (ctx.json) return ctx.out(JSON.stringify({ at: new Date().toISOString(), event: name, ...payload, ...('error' in payload ? { error: (payload as { error: Error }).error.message } : {}) }));
    const p = payload as { taskId?: string; step?: string; attempt?: number };
    const key = `${p.taskId}/${p.step}`;
    if (block.live && name === 'step:started') {
      return block.set(key, { label: `task ${p.taskId} step ${p.step}${(p.attempt ?? 1) > 1 ? ` (attempt ${p.attempt})` : ''}`, startedAt: Date.now(), usage: spentOf(p.taskId as string) });
    }
    if (name === 'step:completed' || name === 'step:failed' || name === 'step:retrying') block.remove(key);
    if (name === 'run:finished') spent.delete(p.taskId as string);
    if (name === 'worker:stopped') block.stop();
    if (!quiet || name.startsWith('worker:') || name === 'lease:lost') block.log(describeEvent(name, payload));
  };
  // Quiet (and not --json): only the worker's own events and lost leases are printed, so only they
  // are listened to (a run builds the payload of a step event only when someone listens).
  const events = ['worker:started', 'worker:stopping', 'worker:stopped', 'worker:error', 'run:claimed', 'run:finished', 'step:started', 'step:completed', 'step:retrying', 'step:failed', 'lease:lost'] as const;
  for (const name of events) {
    if (quiet && !ctx.json && !name.startsWith('worker:') && name !== 'lease:lost') continue;
    w.on(name, (p) => log(name, p as never));
  }
  /** A message of the CLI itself: a line for people, a JSON object in the --json stream. */
  const note = (text: string, signal: string, action: string): void =>
    ctx.out(ctx.json ? JSON.stringify({ at: new Date().toISOString(), event: 'cli:signal', signal, action }) : text);
  // The signal handlers come first: a SIGTERM while the worker starts (a deploy that changes its
  // mind) stops it gracefully once it has started, instead of killing it with its leases.
  let started: Promise<void> = Promise.resolve();
  const stopped = new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (sig: string): void => {
      if (stopping) {
        note(`${sig} again: exiting without waiting; leases will expire and other workers resume the tasks.`, sig, 'exit');
        process.exit(130);
      }
      stopping = true;
      note(`${sig}: stopping gracefully (in-flight steps may finish; send ${sig} again to exit at once)…`, sig, 'stop');
      void started.then(() => w.stop(), () => undefined).then(() => engine.close()).then(resolve);
    };
    process.on('SIGINT', () => onSignal('SIGINT'));
    process.on('SIGTERM', () => onSignal('SIGTERM'));
  });
  started = w.start();
  await started;
  await stopped;
}

function describeEvent<K extends keyof WorkerEvents>(name: K, p: WorkerEvents[K]): string {
  const at = dim(new Date().toISOString().slice(11, 23));
  const a = p as Record<string, unknown>;
  const task = a.taskId ? `${dim('task')} ${String(a.taskId)}` : '';
  switch (name) {
    case 'worker:started':
      return `${at} worker ${String(a.workerId)} started; workflows: ${(a.workflows as string[]).join(', ')}`;
    case 'worker:stopping':
      return `${at} worker stopping (${String(a.inFlight)} in flight)`;
    case 'worker:stopped':
      return `${at} worker stopped`;
    case 'worker:error':
      return `${at} ${colorStatus('failed')} during ${String(a.during)}: ${(a.error as Error).message}`;
    case 'run:claimed':
      return `${at} ${task} ${a.reclaimed ? bold('reclaimed after a lost worker') : 'claimed'} (${String(a.workflow)}, epoch ${String(a.epoch)})`;
    case 'run:finished':
      return `${at} ${task} → ${colorStatus(String(a.status))} after ${formatMs(a.durationMs as number)}`;
    case 'step:started':
      return `${at} ${task} step ${bold(String(a.step))} started${(a.attempt as number) > 1 ? ` (attempt ${String(a.attempt)})` : ''}`;
    case 'step:completed':
      return `${at} ${task} step ${bold(String(a.step))} ${colorStatus('completed')} in ${formatMs(a.durationMs as number)}`;
    case 'step:retrying':
      return `${at} ${task} step ${bold(String(a.step))} attempt ${String(a.attempt)} failed: ${(a.error as Error).message}; retry in ${formatMs(a.delayMs as number)}${a.parked ? ' (task parked)' : ''}`;
    case 'step:failed':
      return `${at} ${task} step ${bold(String(a.step))} ${colorStatus('failed')}: ${(a.error as Error).message}`;
    case 'lease:lost':
      return `${at} ${task} ${colorStatus('failed')} lease lost (epoch ${String(a.epoch)}): another worker owns it; this run's writes were refused`;
    default:
      return `${at} ${name} ${JSON.stringify(p)}`;
  }
}

export async function start(ctx: CommandContext): Promise<void> {
  const name = need(ctx, 0, 'workflow name (stepwise start <workflow> --input JSON)');
  if (str(ctx.options, 'inputs') !== undefined) return startMany(ctx, name);
  const input = parseJson(str(ctx.options, 'input'), '--input');
  const key = keyOption(ctx);
  await withEngine(ctx, async (engine) => {
    const res = await engine.start(name, input, { ...by(ctx), ...(key !== undefined ? { idempotencyKey: key } : {}) });
    if (ctx.json && !ctx.options.wait) return ctx.out(JSON.stringify(res));
    if (!ctx.json) ctx.out(res.created ? `Started ${res.id} (${name})` : `Task ${res.id} already exists for key ${key} (${res.status})`);
    if (ctx.options.wait) await follow(ctx, engine, res.id);
  });
}

/**
 * `start <workflow> --inputs FILE.jsonl`: one task per non-empty line (the line is its input, JSON),
 * all started by one `startMany` call. Every line is parsed before anything is started.
 */
async function startMany(ctx: CommandContext, name: string): Promise<void> {
  const file = str(ctx.options, 'inputs') as string;
  if (str(ctx.options, 'input') !== undefined || str(ctx.options, 'key') !== undefined || ctx.options.wait) {
    throw new InvalidArgumentError('--inputs starts one task per line: it does not combine with --input, --key or --wait (use --key-field for keys).');
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
      if (!ctx.json) out(`${dim(time(s.finishedAt ?? s.startedAt))}   step ${bold(s.name)} ${colorStatus(s.status)}${s.durationMs !== null ? ` in ${formatMs(s.durationMs)}` : ''}${u ? ` ${dim(usageSoFar(u))}` : ''}`);
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
  const statusOpt = str(ctx.options, 'status');
  const statuses = statusOpt?.split(',').map((s) => s.trim());
  for (const s of statuses ?? []) if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown status "${s}" (pending, running, waiting, paused, cancelling, succeeded, failed, cancelled).`);
  await withEngine(ctx, async (engine) => {
    const page = await engine.list({
      ...(statuses ? { status: statuses as TaskStatus[] } : {}),
      ...(str(ctx.options, 'workflow') ? { workflow: str(ctx.options, 'workflow') } : {}),
      ...(int(ctx, 'limit') ? { limit: int(ctx, 'limit') } : {}),
      ...(str(ctx.options, 'cursor') ? { cursor: str(ctx.options, 'cursor') } : {}),
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
    ctx.out(ctx.json ? JSON.stringify(t) : taskDetail(t));
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

/** `--as NAME`: who asks, recorded in the task's log. */
function by(ctx: CommandContext): { by?: string } {
  const name = str(ctx.options, 'as');
  if (name === undefined) return {};
  if (!name.trim()) throw new InvalidArgumentError('--as must name who asks (recorded in the task\'s log).');
  return { by: name };
}

export const cancel = command((e, id, ctx) => e.cancel(id, { ...by(ctx), ...(str(ctx.options, 'reason') ? { reason: str(ctx.options, 'reason') } : {}) }), 'cancel');
export const retry = command((e, id, ctx) => e.retry(id, { ...by(ctx), ...(str(ctx.options, 'from-step') !== undefined ? { fromStep: str(ctx.options, 'from-step') } : {}) }), 'retry');
export const pause = command((e, id, ctx) => e.pause(id, by(ctx)), 'pause');
export const resume = command((e, id, ctx) => e.resume(id, by(ctx)), 'resume');

export async function deleteTask(ctx: CommandContext): Promise<void> {
  const id = need(ctx, 0, 'task id (stepwise delete <id>)');
  await withEngine(ctx, async (engine) => {
    const t = await engine.delete(id, by(ctx));
    ctx.out(ctx.json ? JSON.stringify({ deleted: t }) : `Deleted ${t.id} (${t.workflow}, ${colorStatus(t.status)})`);
  });
}

export async function purge(ctx: CommandContext): Promise<void> {
  const olderThan = str(ctx.options, 'older-than');
  if (olderThan === undefined) throw new InvalidArgumentError('purge needs --older-than: how long ago the tasks must have finished (\'30d\'; 0 for every finished task).');
  const list = (name: string): string[] | undefined => str(ctx.options, name)?.split(',').map((s) => s.trim()).filter(Boolean);
  const statuses = list('status');
  const workflows = list('workflow');
  const dryRun = ctx.options['dry-run'] === true;
  await withEngine(ctx, async (engine) => {
    const r = await engine.purge({
      olderThan, dryRun, ...by(ctx),
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
      ...by(ctx), ...(key !== undefined ? { idempotencyKey: key } : {}), ...(ctx.options['require-waiting'] === true ? { requireWaiting: true } : {}),
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
    ctx.out(res.created ? `Sent "${event}" to ${id}${res.state ? ` in state ${res.state}` : ''}` : `Already sent (key ${key}; ${res.delivered === 'consumed' ? 'the machine has taken it' : 'the machine is taking it'})`);
  });
}

export async function migrate(ctx: CommandContext): Promise<void> {
  await withEngine(ctx, async (engine) => {
    await engine.ready();
    ctx.out(ctx.json ? JSON.stringify({ migrated: true, db: ctx.db }) : `Schema is up to date in ${ctx.db}`);
  }, true);
}
