// A deletion is reported to observers (`onTasksDeleted`) even when the process that made it is
// SIGKILLed between its commit and its report: the deletion wrote a record of each task in its
// transaction, and another process reports the records left behind (once the deleting process's
// time to report them, DELETION_REPORT_MS, has passed), on SQLite and PostgreSQL.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, workflow, type Observer, type TasksDeletedEvent } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { DELETION_REPORT_MS } from '../src/retention/purge.ts';
import { FAST, eventually, schemasOfThisFile, tempDir } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { spawnCli } from './support/processes.ts';

const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_retention');
const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'retention.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL crash test of deletion reports is skipped.');

const done = workflow('report-done', async (ctx) => ctx.step('work', () => 'ok'));

function deletions(): { observer: Observer; seen: TasksDeletedEvent[] } {
  const seen: TasksDeletedEvent[] = [];
  return { seen, observer: { name: 'deletions', onTasksDeleted: (e) => void seen.push(e) } };
}

describe.each(stores)('a deletion whose process dies before reporting it ($name)', ({ url: makeUrl }) => {
  it('is reported once by another process, after the deleting process had its time to report it', async () => {
    const url = makeUrl();
    const setup = new Engine({ store: url, workflows: [done] });
    let id: string;
    try {
      const worker = setup.worker(FAST);
      await worker.start();
      const task = await setup.start(done);
      expect(await task.result()).toBe('ok');
      id = task.id;
    } finally {
      await setup.close();
    }
    // `stepwise delete` commits the deletion, then dies before its observers are called.
    const cli = spawnCli(['delete', id, '--db', url, '--as', 'ops'], { STEPWISE_TEST_KILL_AT: 'retention:deleted' });
    const exit = await cli.exited;
    expect(exit.signal, `the CLI should die after the deletion's commit; its output:\n${cli.output()}`).toBe('SIGKILL');

    const { observer, seen } = deletions();
    const clock = new ManualClock(Date.now());
    const engine = new Engine({ store: url, workflows: [done], clock, observers: [observer] });
    try {
      await expect(engine.get(id)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
      // Within the deleting process's time to report, the record is its own.
      await engine.purge({ olderThan: '3650d' });
      expect(seen).toEqual([]);
      await clock.advance(DELETION_REPORT_MS + 1000);
      await engine.purge({ olderThan: '3650d' });
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ reason: 'delete', by: { kind: 'user', id: 'ops' }, tasks: [{ id, workflow: 'report-done', status: 'succeeded' }] });
      // Reported: the record is gone, and nobody reports it again.
      await clock.advance(DELETION_REPORT_MS + 1000);
      await engine.purge({ olderThan: '3650d' });
      expect(seen).toHaveLength(1);
    } finally {
      await engine.close();
    }
  });

  it('a worker with an onTasksDeleted observer reports such a deletion on its own, with its retention sweep period', async () => {
    const url = makeUrl();
    const setup = new Engine({ store: url, workflows: [done] });
    let id: string;
    try {
      const worker = setup.worker(FAST);
      await worker.start();
      const task = await setup.start(done);
      expect(await task.result()).toBe('ok');
      id = task.id;
    } finally {
      await setup.close();
    }
    const cli = spawnCli(['delete', id, '--db', url], { STEPWISE_TEST_KILL_AT: 'retention:deleted' });
    expect((await cli.exited).signal).toBe('SIGKILL');
    const { observer, seen } = deletions();
    // The worker's clock is past the deleting process's time to report.
    const clock = new ManualClock(Date.now() + DELETION_REPORT_MS + 1000);
    const engine = new Engine({ store: url, workflows: [done], clock, observers: [observer] });
    try {
      await engine.worker({ ...FAST, retentionSweepMs: 50 }).start();
      await eventually(() => seen.length > 0, 20_000, 'the worker to report the deletion');
      expect(seen[0]).toMatchObject({ reason: 'delete', tasks: [{ id, workflow: 'report-done', status: 'succeeded' }] });
    } finally {
      await engine.close();
    }
  });
});
