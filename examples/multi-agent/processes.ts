/**
 * The processes of the multi-agent demos: worker processes started through the CLI (from source,
 * as `npx stepwise worker examples/multi-agent/workflow.ts` starts them), CLI commands run to
 * their end, and the offline model they all call.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(resolve(here, '../..'), 'src/cli/main.ts');
/** The TypeScript loader, by absolute path so that the processes start from any working directory. */
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
/** A short lease, so that a killed worker's tasks are reclaimed within seconds. */
export const LEASE_MS = 3000;

/** The worker processes started and not yet exited: stopped with this process, however it ends. */
const live = new Set<ChildProcess>();
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    for (const child of live) child.kill('SIGTERM');
    process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1));
  });
}
// An exit that skipped the demo's own stop (an uncaught error, a signal above): none is left behind.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface WorkerProcess {
  readonly id: string;
  readonly child: ChildProcess;
  /** Resolves when the process has exited (by a signal or otherwise). */
  readonly exited: Promise<void>;
}

/** A worker process serving the planner and the research agent on `db`, calling the model at `modelURL`. */
export function startWorker(id: string, db: string, modelURL: string): WorkerProcess {
  const args = ['worker', join(here, 'workflow.ts'), '--db', db, '--lease-ms', String(LEASE_MS), '--heartbeat-ms', '500', '--poll-ms', '200', '--worker-id', id, '--log', 'none'];
  const child = spawn(process.execPath, ['--import', tsx, cli, ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, STEPWISE_AGENT_BASE_URL: modelURL, NO_COLOR: '1' },
  });
  live.add(child);
  const exited = new Promise<void>((done) =>
    child.once('exit', () => {
      live.delete(child);
      done();
    }),
  );
  return { id, child, exited };
}

/** Stops worker processes gracefully (SIGTERM) and waits for them. */
export async function stopWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.exited));
}

/** `stepwise <args>` run to its end; throws with its output if it fails. */
export function stepwise(args: readonly string[]): string {
  const r = spawnSync(process.execPath, ['--import', tsx, cli, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' }, timeout: 60_000 });
  if (r.status !== 0) throw new Error(`stepwise ${args.join(' ')} exited ${String(r.status)}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** Polls `test` every 50 ms until it holds; throws after `ms` naming `what`. */
export async function until(what: string, test: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
