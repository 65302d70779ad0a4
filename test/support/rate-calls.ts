// What the rate-limit process tests read back: the calls their workers logged
// (test/fixtures/rate-limit-workflows.ts), and the most of them any window holds.
import { existsSync, readFileSync } from 'node:fs';

export interface CallLine {
  task: string;
  n: number;
  key: string;
  drawnAt: number;
  calledAt: number;
  attempt: number;
  pid: number;
}

export function readCalls(path: string): CallLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CallLine);
}

/** The most draws any interval of length `perMs` holds. */
export function busiestWindow(times: number[], perMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while ((sorted[j] as number) <= (sorted[i] as number) - perMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}
