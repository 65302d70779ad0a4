// `stepwise alerts`: the alerts workers raised, newest first, by kind; a kind that does not exist
// is refused with its code, naming the kinds.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, workflow } from '../src/index.ts';
import { eventually, tempDir, waitForStatus } from './support/engine.ts';
import { runCli } from './support/processes.ts';

describe('stepwise alerts', () => {
  it('lists the raised alerts, filters by kind, and refuses an unknown kind', async () => {
    const db = `sqlite:${join(tempDir(), 'cli.db')}`;
    const broken = workflow('broken', async (ctx) => ctx.step('call', () => Promise.reject(new Error('upstream broke'))), { retry: 1 });
    const engine = new Engine({ store: db, workflows: [broken], alerts: { every: '100ms', failureRate: { window: '1h', threshold: 0.5, minFinished: 1 } } });
    const w = engine.worker({ scheduleScanMs: 0 });
    await w.start();
    try {
      await waitForStatus(engine, (await engine.start(broken, {})).id, 'failed');
      await eventually(async () => (await engine.alerts()).length === 1, 15_000, 'the alert');
    } finally {
      await w.stop();
      await engine.close();
    }
    const ls = runCli(['alerts', '--db', db]);
    expect(ls.code).toBe(0);
    expect(ls.out).toMatch(/failure-rate\s+broken\s+Workflow "broken": 1 of the 1 tasks/);
    const json = JSON.parse(runCli(['alerts', '--kind', 'failure-rate', '--json', '--db', db]).out) as Array<{ kind: string; workflow: string }>;
    expect(json.map((a) => [a.kind, a.workflow])).toEqual([['failure-rate', 'broken']]);
    expect(runCli(['alerts', '--kind', 'stuck,budget', '--db', db]).out).toContain('(no alerts');
    const bad = runCli(['alerts', '--kind', 'failures', '--db', db]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('[INVALID_ARGUMENT]');
    expect(bad.err).toContain('failure-rate, crash-loop');
    const typo = runCli(['alerts', '--kinds', 'stuck', '--db', db]);
    expect(typo.code).toBe(2);
    expect(typo.err).toContain("Unknown option '--kinds'");
  });
});
