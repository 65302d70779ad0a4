// `npm start`: the research-brief example survives the worker it kills on purpose.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir } from './support/engine.ts';

const root = new URL('..', import.meta.url).pathname;

describe('npm start (research-brief example)', () => {
  it('finishes after its worker is SIGKILLed mid-run, re-running only the interrupted model call, and after an editor approves the brief', () => {
    const cwd = tempDir(); // the example writes ./.stepwise/ in its working directory
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const r = spawnSync(process.execPath, ['--import', tsx, join(root, 'examples/research-brief/main.ts')], {
      cwd,
      env: { ...process.env, NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('Killing worker-1');
    expect(r.stdout).toMatch(/reclaim\s+running → running by worker-2 \(previous owner worker-1 was dead\)/);
    expect(r.stdout).toContain('succeeded after 3 runs; 1 model call repeated (the interrupted one), every completed step ran exactly once.');
    expect(r.stdout).toMatch(/The brief is parked for review \(task waiting, no worker slot held\)\. Approval (apv_\w+) asks editor\./);
    const approvalId = /Approval (apv_\w+) asks/.exec(r.stdout)?.[1] as string;
    expect(r.stdout).toContain(`A reviewer would run:  npx stepwise approve ${approvalId} --as editor --db sqlite:./.stepwise/stepwise.db`);
    expect(r.stdout).toMatch(/park\s+running → waiting by worker-2/);
    expect(r.stdout).toContain('Reviewed: approved by editor ("Good to go; added a review note.").');
    expect(r.stdout).toMatch(/summarise#3 \(03-idempotency.md\)\s+completed by worker-2.*model called 2× with the same idempotency key/);
    const path = /Brief written to (\S+)/.exec(r.stdout)?.[1] as string;
    const brief = readFileSync(join(cwd, path), 'utf8');
    expect(existsSync(join(cwd, '.stepwise/stepwise.db'))).toBe(true);
    expect(brief.match(/^## \d\. /gm)).toHaveLength(5);
    expect(brief.startsWith('> Reviewed by the editor:')).toBe(true); // the reviewer's edit, handed back through the decision
  }, 120_000);
});
