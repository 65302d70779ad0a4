// `stepwise serve` as a real process: tokens from --auth FILE, refusal without tokens, a request
// through the port, graceful stop, and no token in its logs.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';
import { TOKENS, tokenOf } from './support/server.ts';

const cwd = new URL('..', import.meta.url).pathname;

describe('stepwise serve', () => {
  it('refuses to start without tokens, naming both ways to give them', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--db', `sqlite:${join(tempDir(), 'x.db')}`, '--port', '0'], {
      cwd,
      env: { ...process.env, STEPWISE_TOKENS: '' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('[INVALID_ARGUMENT] No tokens: give --auth FILE');
    expect(r.stderr).toContain('STEPWISE_TOKENS');
  });

  it('serves the API with tokens from an --auth file, runs workflows with --with-worker, and stops on SIGTERM', async () => {
    const dir = tempDir();
    const auth = join(dir, 'tokens.json');
    writeFileSync(auth, JSON.stringify({ tokens: TOKENS }));
    const server = spawnCli(['serve', 'test/fixtures/server-workflows.ts', '--db', `sqlite:${join(dir, 's.db')}`, '--port', '0', '--auth', auth, '--with-worker']);
    let url = '';
    await eventually(
      () => {
        url = /"msg":"listening","url":"([^"]+)"/.exec(server.output())?.[1] ?? '';
        return url !== '';
      },
      60_000,
      `listening: ${server.output()}`,
    );
    const headers = { authorization: `Bearer ${tokenOf('oscar')}`, 'content-type': 'application/json' };
    const started = await fetch(`${url}/api/tasks`, { method: 'POST', headers, body: JSON.stringify({ workflow: 'quick', input: { n: 21 } }) });
    expect(started.status).toBe(201);
    const { id } = (await started.json()) as { id: string };
    let task: { status: string; output?: unknown } = { status: 'pending' };
    await eventually(
      async () => {
        task = (await (await fetch(`${url}/api/tasks/${id}`, { headers })).json()) as typeof task;
        return task.status === 'succeeded';
      },
      30_000,
      'the task to succeed',
    );
    expect(task.output).toEqual({ doubled: 42 });
    expect((await fetch(`${url}/api/tasks`)).status).toBe(401);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    const logs = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logs.some((l) => l.msg === 'transition' && l.taskId === id && (l.actor as { id: string }).id === 'oscar')).toBe(true);
    expect(logs.some((l) => l.msg === 'request' && l.status === 401)).toBe(true);
    for (const t of TOKENS) expect(server.output()).not.toContain(t.token);
  });
});
