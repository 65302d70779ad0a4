// The `stepwise` CLI, run as a real process against a SQLite file.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Engine } from '../src/index.ts';
import { listener, triple } from './fixtures/crash-workflows.ts';
import { eventually, tempDir } from './support/engine.ts';
import { runCli, spawnCli } from './support/processes.ts';

const cwd = new URL('..', import.meta.url).pathname;
const cli = runCli;

describe('stepwise CLI', () => {
  it('starts, lists, shows and explains tasks, with --json for scripts', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'cli.db')}`;
    const worker = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', db, '--poll-ms', '20']);
    await eventually(() => /started; workflows: .*triple/.test(worker.output()), 20_000, `worker start: ${worker.output()}`);

    const started = cli(['start', 'triple', '--input', '{"n":5}', '--key', 'order-1', '--json'], { STEPWISE_DB: db });
    expect(started.code, started.err).toBe(0);
    const { id, created } = JSON.parse(started.out) as { id: string; created: boolean };
    expect(created).toBe(true);
    const again = cli(['start', 'triple', '--input', '{"n":5}', '--key', 'order-1', '--db', db]);
    expect(again.out).toContain(`Task ${id} already exists for key order-1`);

    const engine = new Engine({ store: db });
    try {
      expect(await engine.result(id, { timeout: '20s' })).toBe(18);
    } finally {
      await engine.close();
    }
    const ls = cli(['ls', '--db', db, '--status', 'succeeded']);
    expect(ls.code).toBe(0);
    expect(ls.out).toMatch(new RegExp(`${id}\\s+triple@1\\s+succeeded\\s+1`));
    const lsJson = JSON.parse(cli(['ls', '--db', db, '--json']).out) as { tasks: Array<{ id: string }>; nextCursor: string | null };
    expect(lsJson.tasks.map((t) => t.id)).toEqual([id]);
    expect(lsJson.nextCursor).toBeNull();

    const show = cli(['show', id, '--db', db]);
    expect(show.code).toBe(0);
    expect(show.out).toContain('Steps');
    expect(show.out).toMatch(/0\s+part\s+completed\s+1\s+\d+ms/);
    expect(show.out).toMatch(/2\s+part#3\s+completed/);
    expect(show.out).toMatch(/create\s+∅ → pending/);
    expect(show.out).toMatch(/complete\s+running → succeeded/);
    const showJson = JSON.parse(cli(['show', id, '--db', db, '--json']).out) as { status: string; steps: unknown[]; history: Array<{ type: string }> };
    expect(showJson.status).toBe('succeeded');
    expect(showJson.steps).toHaveLength(3);
    expect(showJson.history.filter((e) => e.type === 'transition')).toHaveLength(3); // create, claim, complete
    expect(showJson.history.filter((e) => e.type === 'step:completed')).toHaveLength(3);
    expect(cli(['explain', id, '--db', db]).out).toContain('Succeeded at');
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  }, 60_000);

  it('pauses, resumes, cancels and retries through commands', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'cmd.db')}`;
    const engine = new Engine({ store: db, workflows: [listener, triple] });
    try {
      const a = await engine.start(listener, { ms: 50 });
      expect(cli(['pause', a.id, '--db', db]).out).toContain(`${a.id} → paused`);
      expect(cli(['resume', a.id, '--db', db]).out).toContain(`${a.id} → pending`);
      expect(cli(['cancel', a.id, '--reason', 'not needed', '--db', db]).out).toContain(`${a.id} → cancelled`);
      expect((await engine.get(a.id)).cancelReason).toBe('not needed');
      const retry = cli(['retry', a.id, '--db', db]);
      expect(retry.code).toBe(1);
      expect(retry.err.trim()).toBe(
        `stepwise: [CONFLICT] Task ${a.id} was cancelled: only a failed task runs again from where it failed. Re-run it from a step with retry(id, { fromStep: '<step>' }) (stepwise retry ${a.id} --from-step <step>), or fork it (engine.fork).`,
      );
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('deletes a finished task, and purges finished tasks by age, status and workflow (--dry-run counts first)', async () => {
    const db = `sqlite:${join(tempDir(), 'purge.db')}`;
    const engine = new Engine({ store: db, workflows: [listener, triple] });
    try {
      const cancelled = await Promise.all([1, 2, 3].map(async () => (await engine.start(listener, { ms: 50 })).id));
      for (const id of cancelled) await engine.cancel(id);
      const pending = (await engine.start(triple, { n: 1 })).id;

      const refused = cli(['delete', pending, '--db', db]);
      expect(refused.code).toBe(1);
      expect(refused.err).toMatch(/^stepwise: \[CONFLICT\] Task \S+ is pending: only a finished task/);
      expect(cli(['delete', cancelled[0] as string, '--db', db, '--as', 'dpo']).out.trim()).toBe(`Deleted ${cancelled[0]} (listener, cancelled)`);
      expect(cli(['delete', cancelled[0] as string, '--db', db]).err).toMatch(/^stepwise: \[TASK_NOT_FOUND\]/);

      expect(cli(['purge', '--older-than', '0', '--status', 'cancelled', '--dry-run', '--db', db]).out.trim()).toBe('Would delete 2 finished tasks (2 cancelled).');
      expect(cli(['purge', '--older-than', '1h', '--dry-run', '--db', db]).out.trim()).toBe('Would delete 0 finished tasks that ended at least 1h ago.');
      expect(cli(['purge', '--older-than', '1d', '--db', db]).out.trim()).toBe('Deleted 0 finished tasks.');
      expect(JSON.parse(cli(['purge', '--older-than', '0', '--workflow', 'listener', '--limit', '1', '--json', '--db', db]).out)).toEqual({
        count: 1,
        byStatus: { succeeded: 0, failed: 0, cancelled: 1 },
        dryRun: false,
      });
      expect(cli(['purge', '--older-than', '0', '--db', db]).out.trim()).toBe('Deleted 1 finished task (1 cancelled).');
      expect((await engine.list()).tasks.map((t) => t.id)).toEqual([pending]);

      const bad: Array<[string[], RegExp]> = [
        [['purge'], /\[INVALID_ARGUMENT\] purge needs --older-than/],
        [['purge', '--older-than', 'a while'], /\[INVALID_ARGUMENT\] purge\(\{ olderThan \}\) "a while" is not a duration/],
        [['purge', '--older-than', '1d', '--status', 'running'], /\[INVALID_ARGUMENT\] purge\(\{ status \}\): "running" is not a status a task can be deleted in/],
        [['delete'], /\[INVALID_ARGUMENT\] Missing task id/],
      ];
      for (const [args, message] of bad) {
        const r = cli([...args, '--db', db]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.err, args.join(' ')).toMatch(message);
      }
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('prints one clear line and exits non-zero on bad input', () => {
    const db = `sqlite:${join(tempDir(), 'bad.db')}`;
    expect(cli(['migrate', '--db', db]).code).toBe(0);
    const cases: Array<[string[], number, RegExp]> = [
      [['show', 'no-such-task', '--db', db], 1, /^stepwise: \[TASK_NOT_FOUND\] No task with id "no-such-task"/],
      [['start', 'triple', '--input', '{oops', '--db', db], 1, /^stepwise: \[INVALID_ARGUMENT\] --input is not valid JSON/],
      [['start', 'nobody-registered-this', '--db', db], 1, /^stepwise: \[WORKFLOW_NOT_FOUND\] Unknown workflow "nobody-registered-this"/],
      [['ls', '--status', 'finished', '--db', db], 1, /^stepwise: \[INVALID_ARGUMENT\] Unknown status "finished"/],
      [['show', '--db', db], 1, /^stepwise: \[INVALID_ARGUMENT\] Missing task id/],
      [['frobnicate'], 2, /^stepwise: unknown command "frobnicate"/],
      [['ls', '--colour'], 2, /^stepwise: Unknown option '--colour'/],
      [['ls', '--db', 'mysql://x'], 1, /^stepwise: \[INVALID_ARGUMENT\] Unsupported store URL "mysql:\/\/x"/],
      [['worker', 'test/fixtures/nope.ts', '--db', db], 1, /^stepwise: \[INVALID_ARGUMENT\] Module not found/],
    ];
    for (const [args, code, message] of cases) {
      const r = cli(args);
      expect(r.code, args.join(' ')).toBe(code);
      expect(r.err.split('\n').filter(Boolean), args.join(' ')).toHaveLength(args[0] === 'ls' && code === 2 ? 2 : 1);
      expect(r.err, args.join(' ')).toMatch(message);
    }
    const json = cli(['show', 'nope', '--db', db, '--json']);
    expect(JSON.parse(json.err)).toEqual({ error: { code: 'TASK_NOT_FOUND', message: 'No task with id "nope". List tasks with `stepwise ls`.' } });
  }, 120_000);

  it('refuses a mistyped SQLite path in read-only commands without creating anything, and names the path', () => {
    const dir = tempDir();
    const missing = join(dir, 'typo', 'stepwsie.db');
    for (const args of [['ls'], ['show', 'x'], ['explain', 'x'], ['cancel', 'x'], ['signal', 'x', 'go'], ['start', 'triple', '--input', '1']]) {
      const r = cli([...args, '--db', `sqlite:${missing}`]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toContain(`[INVALID_ARGUMENT] There is no Stepwise database at ${missing}`);
    }
    expect(existsSync(join(dir, 'typo'))).toBe(false);
    const notDb = join(dir, 'notes.txt');
    writeFileSync(notDb, 'these are not the tables you are looking for, '.repeat(100));
    const r = cli(['ls', '--db', `sqlite:${notDb}`]);
    expect(r.err).toContain(`[INVALID_ARGUMENT] ${notDb} is not a SQLite database`);
    const under = cli(['migrate', '--db', `sqlite:${notDb}/x.db`]);
    expect(under.code).toBe(1);
    expect(under.err).toMatch(/\[INVALID_ARGUMENT\] Cannot open SQLite database .*notes\.txt\/x\.db/);
    expect(cli(['ls', '--db', `sqlite:${join(dir, 'a.db')}?busyTimeoutMs=abc`]).err).toMatch(/\[INVALID_ARGUMENT\] busyTimeoutMs=abc/);
  }, 60_000);

  it('reads --input from a file or standard input, refuses an empty --key, and records --as in the log', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'in.db')}`;
    const engine = new Engine({ store: db, workflows: [triple] });
    try {
      // A worker that served `triple` once registered it: the CLI, without the code, may start it.
      const w = engine.worker();
      await w.start();
      await w.stop();
      const file = join(dir, 'input.json');
      writeFileSync(file, JSON.stringify({ n: 7 }));
      const fromFile = cli(['start', 'triple', '--input', `@${file}`, '--as', 'ops-bot', '--json', '--db', db]);
      expect(fromFile.code, fromFile.err).toBe(0);
      const { id } = JSON.parse(fromFile.out) as { id: string };
      const task = await engine.get(id);
      expect(task.input).toEqual({ n: 7 });
      expect(task.history[0]?.actor).toEqual({ kind: 'user', id: 'ops-bot' });
      const piped = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start', 'triple', '--input', '-', '--json', '--db', db], {
        cwd,
        input: '{"n": 8}',
        encoding: 'utf8',
        env: { ...process.env, NO_COLOR: '1' },
      });
      expect(piped.status, piped.stderr).toBe(0);
      expect((await engine.get((JSON.parse(piped.stdout) as { id: string }).id)).input).toEqual({ n: 8 });
      const emptyKey = cli(['start', 'triple', '--input', '1', '--key', '', '--db', db]);
      expect(emptyKey.code).toBe(1);
      expect(emptyKey.err).toContain('[INVALID_ARGUMENT] --key must not be empty');
      expect(cli(['start', 'triple', '--input', '@/no/such/file.json', '--db', db]).err).toContain('[INVALID_ARGUMENT] --input: cannot read /no/such/file.json');
      expect(cli(['cancel', id, '--as', 'alice', '--db', db]).code).toBe(0);
      const cancelled = await engine.get(id);
      expect(cancelled.history[cancelled.history.length - 1]).toMatchObject({ event: 'cancel', actor: { kind: 'user', id: 'alice' } });
      expect(cli(['worker', 'test/fixtures/crash-workflows.ts', '--concurrency', '0.5', '--db', db]).err).toContain('[INVALID_ARGUMENT] --concurrency must be a whole number ≥ 1, got "0.5"');
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('start --inputs starts one task per JSONL line in one batch, keys from --key-field, a bad line starts nothing', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'many.db')}`;
    const engine = new Engine({ store: db, workflows: [triple] });
    try {
      const w = engine.worker();
      await w.start();
      await w.stop();
      const file = join(dir, 'docs.jsonl');
      writeFileSync(file, `${[1, 2, 3].map((n) => JSON.stringify({ n, id: `doc-${n}` })).join('\n')}\n\n`);
      const r = cli(['start', 'triple', '--inputs', file, '--key-field', 'id', '--json', '--db', db]);
      expect(r.code, r.err).toBe(0);
      const handles = JSON.parse(r.out) as Array<{ id: string; created: boolean }>;
      expect(handles.map((h) => h.created)).toEqual([true, true, true]);
      expect((await engine.get(handles[1]!.id)).input).toEqual({ n: 2, id: 'doc-2' });
      const again = cli(['start', 'triple', '--inputs', file, '--key-field', 'id', '--db', db]);
      expect(again.out).toContain(`${handles[0]!.id} exists`);
      expect(again.out).toContain('Started 0 tasks of triple (3 already existed for their keys)');
      const bad = join(dir, 'bad.jsonl');
      writeFileSync(bad, '{"n": 4}\n{"n": \n');
      const refused = cli(['start', 'triple', '--inputs', bad, '--db', db]);
      expect(refused.code).toBe(1);
      expect(refused.err).toContain('[INVALID_ARGUMENT] --inputs: line 2 is not valid JSON');
      expect(cli(['start', 'triple', '--inputs', file, '--key-field', 'missing', '--db', db]).err).toContain('line 1 has no "missing"');
      expect((await engine.list()).tasks).toHaveLength(3);
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('prints only JSON lines from worker --json, also when it is told to stop', async () => {
    const db = `sqlite:${join(tempDir(), 'json.db')}`;
    const worker = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', db, '--poll-ms', '20', '--json']);
    await eventually(() => worker.output().includes('"worker:started"'), 20_000, `worker start: ${worker.output()}`);
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
    const lines = worker.output().split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(lines.map((l) => (JSON.parse(l) as { event: string }).event)).toEqual(expect.arrayContaining(['worker:started', 'cli:signal', 'worker:stopped']));
  }, 60_000);

  it('uses ./.stepwise/stepwise.db when no --db or STEPWISE_DB is given', () => {
    const dir = tempDir();
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const r = spawnSync(process.execPath, ['--import', tsx, join(cwd, 'src/cli/main.ts'), 'migrate'], {
      cwd: dir,
      env: { ...process.env, STEPWISE_DB: '', NO_COLOR: '1' },
      encoding: 'utf8',
    });
    expect(r.stdout).toContain(`sqlite:./.stepwise/stepwise.db`);
    expect(spawnSync('ls', [join(dir, '.stepwise')], { encoding: 'utf8' }).stdout).toContain('stepwise.db');
  }, 30_000);

  it("refuses a flag the command does not take (another command's flag), naming the command's own, instead of ignoring it", () => {
    const ls = runCli(['ls', '--pending', '--db', 'sqlite:/nonexistent/x.db']);
    expect(ls.code).toBe(2);
    expect(ls.err).toContain(
      'stepwise ls: --pending is not an option of ls (its options: --status, --workflow, --parent, --tag, --since, --until, --failed-with, --text, --limit, --cursor, and --db, --json).',
    );
    const show = runCli(['show', 'abc', '--reason', 'x']);
    expect(show.code).toBe(2);
    expect(show.err).toContain('--reason is not an option of show (it takes none');
  });
});
