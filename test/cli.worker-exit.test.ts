// `stepwise worker` exits after one SIGTERM once it has stopped, whatever its module holds open.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { eventually, tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';

describe('stepwise worker and SIGTERM', () => {
  it('exits after one SIGTERM although the module keeps an Engine and a timer open', async () => {
    const db = `sqlite:${join(tempDir(), 'exit.db')}`;
    const w = spawnCli(['worker', 'test/fixtures/holds-open.ts', '--db', db, '--poll-ms', '50', '--quiet'], { STEPWISE_DB: db });
    try {
      await eventually(() => w.output().includes('started; workflows'), 30_000, 'the worker to start');
      w.child.kill('SIGTERM');
      // A single SIGTERM is enough: the process exits on its own (the test's timeout fails it otherwise).
      const exit = await w.exited;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(w.output()).toContain('worker stopped');
    } finally {
      w.child.kill('SIGKILL');
    }
  }, 60_000);
});
