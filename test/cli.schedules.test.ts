// `stepwise schedules`: create, list, show, pause, resume, trigger and delete from the command line.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, workflow } from '../src/index.ts';
import { tempDir } from './support/engine.ts';
import { runCli } from './support/processes.ts';

describe('stepwise schedules', () => {
  it('creates, lists, shows, pauses, resumes, triggers and deletes a schedule; refuses a bad cron with its code', async () => {
    const db = `sqlite:${join(tempDir(), 'cli.db')}`;
    // A worker has served the workflow (so that the store knows it), as in a deployment.
    const engine = new Engine({ store: db, workflows: [workflow('report', async () => 'done')] });
    const w = engine.worker({ scheduleScanMs: 0 });
    await w.start();
    await w.stop();
    await engine.close();
    const created = runCli([
      'schedules',
      'create',
      'nightly',
      '--workflow',
      'report',
      '--cron',
      '0 2 * * *',
      '--timezone',
      'Europe/Berlin',
      '--input',
      '{"kind":"nightly"}',
      '--json',
      '--db',
      db,
    ]);
    expect(created.code).toBe(0);
    expect(JSON.parse(created.out)).toMatchObject({ id: 'nightly', workflow: 'report', timezone: 'Europe/Berlin', input: { kind: 'nightly' }, created: true });
    const ls = runCli(['schedules', '--db', db]);
    expect(ls.out).toMatch(/nightly\s+report\s+0 2 \* \* \*\s+Europe\/Berlin/);
    expect(runCli(['schedules', 'pause', 'nightly', '--json', '--db', db]).out).toContain('"paused":true');
    expect(runCli(['schedules', 'resume', 'nightly', '--db', db]).out).toContain('active');
    const show = runCli(['schedules', 'show', 'nightly', '--db', db]);
    expect(show.out).toContain('next run');
    const triggered = runCli(['schedules', 'trigger', 'nightly', '--json', '--db', db]);
    const { taskId } = JSON.parse(triggered.out) as { taskId: string };
    expect(runCli(['show', taskId, '--json', '--db', db]).out).toContain('"workflow":"report"');
    expect(runCli(['schedules', 'delete', 'nightly', '--db', db]).out).toContain('deleted schedule nightly');
    const gone = runCli(['schedules', 'show', 'nightly', '--db', db]);
    expect(gone.code).toBe(1);
    expect(gone.err).toContain('[NOT_FOUND] No schedule with id "nightly"');
    const bad = runCli(['schedules', 'create', 'x', '--workflow', 'report', '--cron', '0 2 * *', '--db', db]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('[INVALID_ARGUMENT]');
    expect(runCli(['schedules', 'frobnicate', '--db', db]).err).toContain('unknown subcommand "frobnicate"');
  }, 60_000);
});
