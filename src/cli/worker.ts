/**
 * @module cli/worker
 * `stepwise worker <module>`: runs the workflows a module exports until SIGINT/SIGTERM. It prints
 * the worker's events (a live block of steps in flight on a terminal, plain lines elsewhere, JSON
 * objects with --json) and, with `--log json|pretty` (json by default when standard output is not
 * a terminal), the structured log of transitions, steps, signals and approvals.
 */
import { Engine, formatMs, type Observer, type Worker, type WorkerEvents, type WorkerOptions } from '../index.ts';
import { int, listFlag, logFormat, need, str, type CommandContext } from './context.ts';
import { loadModule } from './load-module.ts';
import { LiveBlock } from './live.ts';
import { bold, colorStatus, dim } from './style.ts';
import { payloadOptionsFromEnv } from './payload-env.ts';

type Spent = { totalTokens: number; costUsd: number };

/**
 * The tokens and cost each task has spent so far, summed from the model-call entries of its log as
 * this process writes them (kept only when there is a terminal to show them on).
 */
function usageTracker(): { spentOf: (taskId: string) => Spent; forget: (taskId: string) => void; observer: Observer } {
  const spent = new Map<string, Spent>();
  const spentOf = (taskId: string): Spent => {
    let u = spent.get(taskId);
    if (!u) spent.set(taskId, (u = { totalTokens: 0, costUsd: 0 }));
    return u;
  };
  const observer: Observer = {
    onEvent: (e) => {
      if (e.type !== 'usage:attempt') return;
      const u = spentOf(e.taskId);
      u.totalTokens += e.usage.inputTokens + e.usage.outputTokens;
      u.costUsd += e.usage.costUsd;
    },
  };
  return { spentOf, forget: (taskId) => void spent.delete(taskId), observer };
}

function workerOptions(ctx: CommandContext): WorkerOptions {
  const only = listFlag(ctx, 'workflows');
  return {
    ...(int(ctx, 'concurrency') !== undefined ? { concurrency: int(ctx, 'concurrency') } : {}),
    ...(int(ctx, 'claim-batch') !== undefined ? { claimBatch: int(ctx, 'claim-batch') } : {}),
    ...(int(ctx, 'lease-ms') !== undefined ? { leaseMs: int(ctx, 'lease-ms') } : {}),
    ...(int(ctx, 'heartbeat-ms') !== undefined ? { heartbeatMs: int(ctx, 'heartbeat-ms') } : {}),
    ...(int(ctx, 'poll-ms') !== undefined ? { pollIntervalMs: int(ctx, 'poll-ms') } : {}),
    ...(int(ctx, 'grace-ms') !== undefined ? { shutdownGraceMs: int(ctx, 'grace-ms') } : {}),
    ...(int(ctx, 'keep-parked', 0) !== undefined ? { keepParked: int(ctx, 'keep-parked', 0) } : {}),
    ...(str(ctx.options, 'worker-id') ? { workerId: str(ctx.options, 'worker-id') } : {}),
    ...(only?.length ? { workflows: only } : {}),
  };
}

const WORKER_EVENTS = [
  'worker:started',
  'worker:stopping',
  'worker:stopped',
  'worker:error',
  'run:claimed',
  'run:finished',
  'step:started',
  'step:completed',
  'step:retrying',
  'step:failed',
  'lease:lost',
] as const;

/**
 * Prints the worker's events. On a terminal, steps in flight are a live block (spinner, elapsed
 * time, the task's tokens so far) and a step's start is not printed as its own line; elsewhere
 * every event is one plain line. Quiet (and not --json): only the worker's own events and lost
 * leases are printed, so only they are listened to (a run builds the payload of a step event only
 * when someone listens).
 */
function printEvents(ctx: CommandContext, w: Worker, block: LiveBlock, usage: ReturnType<typeof usageTracker>, quiet: boolean): void {
  const log = <K extends keyof WorkerEvents>(name: K, payload: WorkerEvents[K]): void => {
    if (ctx.json)
      return ctx.out(JSON.stringify({ at: new Date().toISOString(), event: name, ...payload, ...('error' in payload ? { error: (payload as { error: Error }).error.message } : {}) }));
    const p = payload as { taskId?: string; step?: string; attempt?: number };
    const key = `${p.taskId}/${p.step}`;
    if (block.live && name === 'step:started') {
      return block.set(key, {
        label: `task ${p.taskId} step ${p.step}${(p.attempt ?? 1) > 1 ? ` (attempt ${p.attempt})` : ''}`,
        startedAt: Date.now(),
        usage: usage.spentOf(p.taskId as string),
      });
    }
    if (name === 'step:completed' || name === 'step:failed' || name === 'step:retrying') block.remove(key);
    if (name === 'run:finished') usage.forget(p.taskId as string);
    if (name === 'worker:stopped') block.stop();
    if (!quiet || name.startsWith('worker:') || name === 'lease:lost') block.log(describeEvent(name, payload));
  };
  for (const name of WORKER_EVENTS) {
    if (quiet && !ctx.json && !name.startsWith('worker:') && name !== 'lease:lost') continue;
    w.on(name, (p) => log(name, p as never));
  }
}

/**
 * Stops the worker gracefully on SIGINT/SIGTERM, at once on a second one. The handlers are set
 * before the worker starts: a SIGTERM while it starts (a deploy that changes its mind) stops it
 * once it has started, instead of killing it with its leases. Resolves once it has stopped.
 */
function stopOnSignals(ctx: CommandContext, shutdown: () => Promise<void>): Promise<void> {
  /** A message of the CLI itself: a line for people, a JSON object in the --json stream. */
  const note = (text: string, signal: string, action: string): void => ctx.out(ctx.json ? JSON.stringify({ at: new Date().toISOString(), event: 'cli:signal', signal, action }) : text);
  return new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (sig: string): void => {
      if (stopping) {
        note(`${sig} again: exiting without waiting; leases will expire and other workers resume the tasks.`, sig, 'exit');
        process.exit(130);
      }
      stopping = true;
      note(`${sig}: stopping gracefully (in-flight steps may finish; send ${sig} again to exit at once)…`, sig, 'stop');
      void shutdown().then(resolve);
    };
    process.on('SIGINT', () => onSignal('SIGINT'));
    process.on('SIGTERM', () => onSignal('SIGTERM'));
  });
}

export async function worker(ctx: CommandContext): Promise<void> {
  const { workflows, rateLimits } = await loadModule(need(ctx, 0, 'module path (stepwise worker <module>)'));
  const quiet = ctx.options.quiet === true;
  // The JSON log is the default where a log collector reads stdout; --quiet (and a terminal, which
  // has the live block) leave it off unless --log asks for it.
  const format = logFormat(ctx, quiet || ctx.stdout?.isTTY === true ? 'none' : 'json');
  const live = !ctx.json && !quiet && ctx.stdout?.isTTY === true;
  const usage = usageTracker();
  const block = new LiveBlock(ctx.stdout ?? { write: (text: string) => ctx.out(text.replace(/\n$/, '')) }, { tty: live });
  // The logger (pino and the server package) is loaded only when a log is written.
  const logObserver = format === 'none' ? null : (await import('./logging.ts')).cliLogObserver(format, (line) => block.log(line));
  const observers = [...(live ? [usage.observer] : []), ...(logObserver ? [logObserver] : [])];
  const engine = new Engine({ store: ctx.db, ...payloadOptionsFromEnv(), workflows, ...(observers.length ? { observers } : {}), ...(rateLimits ? { rateLimits } : {}) });
  const w = engine.worker(workerOptions(ctx));
  printEvents(ctx, w, block, usage, quiet);
  let started: Promise<void> = Promise.resolve();
  const stopped = stopOnSignals(ctx, () =>
    started
      .then(
        () => w.stop(),
        () => undefined,
      )
      .then(() => engine.close()),
  );
  started = w.start();
  await started;
  await stopped;
  exitSoon();
}

/**
 * Once the worker has stopped (its runs finished, parked or released) the process exits, even if
 * the module holds something open (an Engine of its own, a client, a timer): a deploy must not wait
 * for its kill timeout. What is left gets a moment to flush its output first.
 */
function exitSoon(): void {
  setTimeout(() => process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0), 500).unref();
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
