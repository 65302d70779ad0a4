// Live progress of `start --wait` and `worker`: redrawn on a terminal (a real pseudo-terminal
// through script(1)), plain lines otherwise.
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bar, itemLine, LiveBlock, taskItem, usageSoFar } from '../src/cli/live.ts';
import type { TaskSummary } from '../src/index.ts';
import { eventually, tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';

const cwd = new URL('..', import.meta.url).pathname;
const ESC = '\x1b';

describe('live progress block', () => {
  it('draws a spinner, the elapsed time and a bar on a terminal, and erases the block before each permanent line', () => {
    let text = '';
    let now = 1_000;
    const block = new LiveBlock({ write: (t: string) => (text += t), isTTY: true, columns: 120 }, { now: () => now });
    block.set('a', { label: 'task t1 step fetch', startedAt: 0, done: 5, total: 10, note: 'pages' });
    expect(text).toContain('task t1 step fetch 1.0s [##########----------] 5/10 pages');
    now = 2_500;
    block.tick();
    expect(text).toContain(`${ESC}[1A${ESC}[2K`);
    expect(text).toContain('task t1 step fetch 2.5s');
    block.log('step fetch completed');
    expect(text).toMatch(/step fetch completed\n[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] task t1 step fetch 2\.5s \[#{10}-{10}\] 5\/10 pages\n$/);
    block.stop();
    expect(text.endsWith(`${ESC}[1A${ESC}[2K\r`)).toBe(true);
  });

  it('prints only the permanent lines when the output is not a terminal', () => {
    let text = '';
    const block = new LiveBlock({ write: (t: string) => (text += t), isTTY: false });
    block.set('a', { label: 'task t1 step fetch', startedAt: 0 });
    block.tick();
    block.log('step fetch completed');
    block.stop();
    expect(text).toBe('step fetch completed\n');
  });

  it('formats bars and lines within bounds', () => {
    expect(bar(0, 10, 10)).toBe('[----------] 0/10');
    expect(bar(15, 10, 10)).toBe('[##########] 15/10');
    expect(itemLine({ label: 'x', startedAt: 0, done: 7 }, 0, 500)).toBe('⠋ x 500ms 7');
  });

  it('shows the tokens and cost so far on the live line of a task that has called a model, and nothing of usage otherwise', () => {
    expect(usageSoFar({ totalTokens: 12_345, costUsd: 0.01234 })).toBe('· 12,345 tokens $0.0123');
    const base = { id: 't1', status: 'running', progress: { step: 'write', done: 2, total: 4, at: 0 }, usage: null } as unknown as TaskSummary;
    const steps = [{ name: 'read' }];
    expect(itemLine(taskItem({ ...base, steps }, 0), 0, 1_000)).toBe('⠋ running step write 1.0s [##########----------] 2/4');
    const used = {
      ...base,
      usage: { total: { inputTokens: 6000, outputTokens: 300, cachedInputTokens: 0, reasoningTokens: 0, totalTokens: 6300, costUsd: 0.0069, attempts: 1 }, steps: {} },
    } as unknown as TaskSummary;
    expect(itemLine(taskItem({ ...used, steps }, 0), 0, 1_000)).toBe('⠋ running step write 1.0s [##########----------] 2/4 · 6,300 tokens $0.0069');
    expect(itemLine(taskItem({ ...used, progress: null, steps }, 0), 0, 1_000)).toBe('⠋ running after read 1.0s · 6,300 tokens $0.0069');
  });
});

describe('CLI live progress', () => {
  it('start --wait on a terminal redraws the running step with its progress bar; piped, it prints plain lines', { timeout: 180_000 }, async () => {
    if (!existsSync('/usr/bin/script')) throw new Error('script(1) is needed for the terminal test (util-linux)');
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'live.db')}`;
    const worker = spawnCli(['worker', 'test/fixtures/server-workflows.ts', '--db', db, '--poll-ms', '20']);
    await eventually(() => /started; workflows: .*crawl/.test(worker.output()), 30_000, `worker start: ${worker.output()}`);

    const gate = join(dir, 'gate');
    const command = `${process.execPath} --import tsx src/cli/main.ts start crawl --input '${JSON.stringify({ gate })}' --wait --db ${db}`;
    const tty = spawn('script', ['-qefc', command, '/dev/null'], { cwd, env: { ...process.env, NO_COLOR: '1', TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let screen = '';
    tty.stdout.on('data', (d: Buffer) => (screen += d.toString()));
    const exited = new Promise<number | null>((r) => tty.on('exit', (code) => r(code)));
    onTestFinished(() => {
      // script(1) and the CLI under it are one process group (detached): end both.
      if (tty.exitCode === null) process.kill(-(tty.pid as number), 'SIGKILL');
    });
    await eventually(() => screen.includes('[######--------------] 3/10 pages'), 30_000, `the progress bar: ${JSON.stringify(screen)}`);
    expect(screen).toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] running step fetch/);
    writeFileSync(gate, '');
    expect(await exited).toBe(0);
    expect(screen).toContain(`${ESC}[2K`);
    expect(screen).toContain('output: "crawled"');

    // The same command piped: no escape codes, no spinner, one line per change.
    const gate2 = join(dir, 'gate2');
    writeFileSync(gate2, '');
    const piped = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start', 'crawl', '--input', JSON.stringify({ gate: gate2 }), '--wait', '--db', db], {
      cwd,
      env: { ...process.env, NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(piped.status, piped.stderr).toBe(0);
    expect(piped.stdout).not.toContain(ESC);
    expect(piped.stdout).not.toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/);
    expect(piped.stdout).toMatch(/step fetch completed/);
    expect(piped.stdout).toContain('output: "crawled"');

    // A task that calls a model: each step's line carries its tokens and cost (read: 2 × 1200 in + 300 out, at $1 / $3 per million).
    const usage = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'start', 'summarize', '--input', '{"pages":2}', '--wait', '--db', db], {
      cwd,
      env: { ...process.env, NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(usage.status, usage.stderr).toBe(0);
    expect(usage.stdout).toMatch(/step read completed in \S+ · 2,700 tokens \$0\.0033/);
    expect(usage.stdout).toMatch(/step write completed in \S+ · 1,200 tokens \$0\.0020/);
    worker.child.kill('SIGTERM');
    await worker.exited;
  });

  it('worker on a terminal shows steps in flight as a live block and prints each finished step once', { timeout: 180_000 }, async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'live-worker.db')}`;
    const command = `${process.execPath} --import tsx src/cli/main.ts worker test/fixtures/server-workflows.ts --db ${db} --poll-ms 20`;
    const tty = spawn('script', ['-qefc', command, '/dev/null'], { cwd, env: { ...process.env, NO_COLOR: '1', TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    tty.stdout.on('data', (d: Buffer) => (screen += d.toString()));
    const exited = new Promise<number | null>((r) => tty.on('exit', (code) => r(code)));
    try {
      await eventually(() => /started; workflows: .*crawl/.test(screen), 30_000, `worker start: ${screen}`);
      const gate = join(dir, 'gate');
      const { Engine } = await import('../src/index.ts');
      const engine = new Engine({ store: db });
      const { id } = await engine.start('crawl', { gate });
      await eventually(() => new RegExp(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] task ${id} step fetch`).test(screen), 30_000, `the live line: ${JSON.stringify(screen.slice(-500))}`);
      expect(screen).not.toMatch(/step fetch started/);
      writeFileSync(gate, '');
      expect(await engine.result(id, { timeout: '60s' })).toBe('crawled');
      await eventually(() => /step fetch completed/.test(screen), 30_000, 'the completed line');
      await engine.close();
      expect(screen.match(/step fetch completed/g)).toHaveLength(1);
      expect(screen).toContain(`${ESC}[2K`);
      // A task that has called a model: its live line shows the tokens and cost so far
      // (1,500 in + 500 out at $1 / $3 per million = $0.0030); a task that has not shows none.
      expect(screen).not.toContain('tokens');
      const gate2 = join(dir, 'gate2');
      const metered = new Engine({ store: db });
      const m = await metered.start('metered-crawl', { gate: gate2 });
      await eventually(() => new RegExp(`task ${m.id} step fetch \\S+ · 2,000 tokens \\$0\\.0030`).test(screen), 30_000, `the metered live line: ${JSON.stringify(screen.slice(-500))}`);
      writeFileSync(gate2, '');
      expect(await metered.result(m.id, { timeout: '60s' })).toBe('crawled');
      await metered.close();
    } finally {
      tty.kill('SIGTERM');
      await exited;
    }
  });
});
