// Spawning real worker processes (the CLI, run from source through tsx) for crash tests.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { afterEach } from 'vitest';

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
});

export interface SpawnedWorker {
  child: ChildProcess;
  pid: number;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnCli(args: string[], env: Record<string, string> = {}): SpawnedWorker {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, pid: child.pid as number, output: () => out, exited };
}

/** One CLI command run to its end (from source through tsx): its exit code and output. */
export function runCli(args: string[], env: Record<string, string> = {}): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, NO_COLOR: '1', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

export interface LogLine {
  event: string;
  key: string;
  pid: number;
  at: number;
  attempt?: number;
}

export function readLog(path: string): LogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LogLine);
}
