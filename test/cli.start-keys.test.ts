// `stepwise start` with --title, --debounce and --singleton, and titles in `ls` and `show`, run as a
// real process against a SQLite file whose workflows a worker registered (no worker runs the tasks).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { triple } from './fixtures/crash-workflows.ts';
import { FAST, tempDir } from './support/engine.ts';
import { runCli } from './support/processes.ts';

async function registered(): Promise<string> {
  const db = `sqlite:${join(tempDir(), 'cli-keys.db')}`;
  const engine = new Engine({ store: db, workflows: [triple] });
  try {
    const worker = engine.worker(FAST);
    await worker.start();
    await worker.stop();
  } finally {
    await engine.close();
  }
  return db;
}

describe('stepwise start with titles, debounce and singleton', () => {
  it('starts titled, debounced and singleton tasks, and lists and shows their titles and keys', async () => {
    const db = await registered();
    const run = (...args: string[]): { code: number; out: string; err: string } => runCli([...args, '--db', db]);

    const titled = run('start', 'triple', '--input', '{"n":1}', '--title', 'Quarterly report', '--priority', '7', '--json');
    expect(titled.code, titled.err).toBe(0);
    const reader = new Engine({ store: db });
    expect(await reader.get((JSON.parse(titled.out) as { id: string }).id)).toMatchObject({ title: 'Quarterly report', priority: 7 });
    await reader.close();
    const badPriority = run('start', 'triple', '--input', '{"n":1}', '--priority', 'high');
    expect(badPriority.code).not.toBe(0);
    expect(badPriority.err).toContain('--priority takes a whole number 0..1000, got "high"');
    const titledId = (JSON.parse(titled.out) as { id: string }).id;

    const first = run('start', 'triple', '--input', '{"n":2}', '--debounce', 'user-7', '--period', '1h');
    expect(first.code, first.err).toBe(0);
    const debouncedId = /Started (\S+)/.exec(first.out)?.[1] as string;
    expect(first.out).toContain('due in 1h unless another start of key user-7 comes first');
    const second = run('start', 'triple', '--input', '{"n":3}', '--debounce', 'user-7', '--period', '1h', '--max-wait', '2h');
    expect(second.out).toContain(`Debounced into ${debouncedId} (key user-7)`);

    const one = run('start', 'triple', '--input', '{"n":4}', '--singleton', 'nightly', '--json');
    const singletonId = (JSON.parse(one.out) as { id: string }).id;
    const refused = run('start', 'triple', '--input', '{"n":5}', '--singleton', 'nightly');
    expect(refused.code).not.toBe(0);
    expect(refused.err).toContain('SINGLETON_RUNNING');
    expect(refused.err).toContain(singletonId);
    const joined = run('start', 'triple', '--input', '{"n":5}', '--singleton', 'nightly', '--join');
    expect(joined.code, joined.err).toBe(0);
    expect(joined.out).toContain(`Joined ${singletonId}`);

    const ls = run('ls');
    expect(ls.out).toMatch(/ID\s+TITLE\s+WORKFLOW/);
    expect(ls.out).toMatch(new RegExp(`${titledId}\\s+Quarterly report\\s+triple@1\\s+pending`));
    const show = run('show', titledId);
    expect(show.out).toMatch(/title\s+Quarterly report/);
    const showDebounced = run('show', debouncedId);
    expect(showDebounced.out).toMatch(/debounce\s+user-7 \(collecting starts until/);
    expect(showDebounced.out).toMatch(/debounce\s+key user-7: new input/);
    expect(run('explain', debouncedId).out).toContain('a debounced task (key "user-7") waiting for its period to end');
    // A dozen CLI processes, each loading the CLI afresh: slow on a busy machine.
  }, 180_000);

  it('refuses debounce flags without their key or period, and keyed flags with --inputs', () => {
    const db = `sqlite:${join(tempDir(), 'cli-flags.db')}`;
    const noKey = runCli(['start', 'triple', '--period', '1m', '--db', db]);
    expect(noKey.code).not.toBe(0);
    expect(noKey.err).toContain('--period and --max-wait go with --debounce KEY');
    const noPeriod = runCli(['start', 'triple', '--debounce', 'k', '--db', db]);
    expect(noPeriod.err).toContain('--debounce KEY needs --period D');
    const joinAlone = runCli(['start', 'triple', '--join', '--db', db]);
    expect(joinAlone.err).toContain('--join goes with --singleton KEY');
    const batch = runCli(['start', 'triple', '--inputs', '-', '--singleton', 'k', '--db', db]);
    expect(batch.err).toContain('does not combine with --singleton');
  }, 120_000);
});
