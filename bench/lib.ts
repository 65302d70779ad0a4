// Small helpers for the benchmark: timing, medians, temp dirs, spawning workers.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, type TaskStatus } from '../dist/index.js';

export const root = new URL('..', import.meta.url).pathname;

export function tempDir(prefix = 'stepwise-bench-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

export function spawnWorker(db: string, extra: string[] = [], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [join(root, 'dist/cli/main.js'), 'worker', join(root, 'bench/workflows.ts'), '--db', db, '--quiet', ...extra], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ...env },
  });
}

export async function stopWorkers(children: ChildProcess[]): Promise<void> {
  await Promise.all(children.map((c) => new Promise<void>((resolve) => {
    if (c.exitCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  })));
}

/**
 * Waits until none of the tasks is unfinished (one light query every 50 ms, so that the waiting
 * does not load the database it measures); returns the span from first claim to last finish.
 */
export async function waitAllDone(engine: Engine, ids: string[]): Promise<{ spanMs: number; firstClaimAt: number; lastFinishAt: number }> {
  const deadline = Date.now() + 600_000;
  while ((await engine.list({ status: ['pending', 'running', 'waiting', 'cancelling'], limit: 1 })).tasks.length) {
    if (Date.now() > deadline) throw new Error('tasks did not finish within 10 minutes');
    await new Promise((r) => setTimeout(r, 50));
  }
  let first = Infinity;
  let last = 0;
  for (const id of ids) {
    const t = await engine.get(id);
    if (t.status !== 'succeeded') throw new Error(`task ${id} ended ${t.status}`);
    const claim = t.history.find((h) => h.event === 'claim');
    if (claim) first = Math.min(first, claim.at);
    last = Math.max(last, t.finishedAt ?? 0);
  }
  return { spanMs: last - first, firstClaimAt: first, lastFinishAt: last };
}

export type { TaskStatus };

export function fmt(n: number, digits = 1): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
