// Child tasks survive the death of the worker running their parent: real worker processes killed
// with SIGKILL, on SQLite and (when reachable) PostgreSQL. The parent's worker process serves only
// the parent; the children run on a worker of another engine (here, in the test process). After the
// kill, a worker in this process resumes the parent: no second child is started, and every child's
// steps ran once.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { crashLeaf } from './fixtures/child-leaf-workflows.ts';
import { crashParent } from './fixtures/child-parent-workflows.ts';
import { FAST, schemasOfThisFile, tempDir } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/child-parent-workflows.ts';
const N = 6;
const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_child');
const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'children.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL crash tests of child tasks are skipped.');

describe.each(stores)('child tasks on $name (real processes, SIGKILL)', ({ url: makeUrl }) => {
  it.each(['child:created', 'parent:children-running'])(
    'the worker running the parent is killed at %s: the parent resumes elsewhere, no second child, every child step once',
    async (point) => {
      const url = makeUrl();
      const log = join(tempDir(), 'steps.log');
      process.env.STEPWISE_TEST_LOG = log;
      // The children's engine serves only the child workflow (as another deployment would).
      const children = new Engine({ store: url, workflows: [crashLeaf] });
      const parents = new Engine({ store: url, workflows: [crashParent, crashLeaf] });
      try {
        await parents.ready();
        const { id } = await parents.start(crashParent, { n: N });
        const leafWorker = children.worker({ ...FAST, concurrency: 8 });
        await leafWorker.start();
        const a = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log, STEPWISE_TEST_KILL_AT: point });
        const exit = await a.exited;
        expect(exit.signal, `the parent's worker should die at ${point}; its output:\n${a.output()}`).toBe('SIGKILL');
        // The parent resumes on a worker of this process once the dead worker's lease has expired.
        const resumed = parents.worker({ ...FAST, leaseMs: 1500, concurrency: 2 });
        await resumed.start();
        expect(await parents.result(id, { timeout: '60s' })).toBe(((N * (N - 1)) / 2) * 10);
        await resumed.stop();
        await leafWorker.stop();
        const info = await parents.get(id);
        expect(info.runs).toBeGreaterThanOrEqual(2);
        // Exactly N children, each started once (the resumed parent found the ones the dead worker created).
        expect(info.children).toHaveLength(N);
        expect(info.children.every((c) => c.status === 'succeeded')).toBe(true);
        const all = await parents.list({ workflow: 'crash-leaf', limit: 100 });
        expect(all.tasks).toHaveLength(N);
        // Every step of every child ran once.
        const leafSteps = readLog(log).filter((l) => l.event === 'leaf-step');
        expect(leafSteps).toHaveLength(2 * N);
        expect(new Set(leafSteps.map((l) => l.key)).size).toBe(2 * N);
        const parentSteps = readLog(log).filter((l) => l.event === 'parent-step');
        if (point === 'parent:children-running') expect(parentSteps.map((l) => l.pid)[0]).toBe(a.pid);
      } finally {
        await children.close();
        await parents.close();
      }
    },
    90_000,
  );

  it('the worker running a child is killed mid-step: the child resumes on another worker and the parent gets every output', async () => {
    const url = makeUrl();
    const log = join(tempDir(), 'steps.log');
    process.env.STEPWISE_TEST_LOG = log;
    const parents = new Engine({ store: url, workflows: [crashParent] });
    const children = new Engine({ store: url, workflows: [crashLeaf] });
    try {
      await parents.ready();
      const parentWorker = parents.worker({ ...FAST, concurrency: 2 });
      await parentWorker.start();
      const { id } = await parents.start(crashParent, { n: N });
      // The children run in a worker process that dies in the middle of a child's step `b`.
      const a = spawnCli(['worker', 'test/fixtures/child-leaf-workflows.ts', '--db', url, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], {
        STEPWISE_TEST_LOG: log,
        STEPWISE_TEST_KILL_AT: 'leaf:b',
      });
      const exit = await a.exited;
      expect(exit.signal, `the children's worker should die in step b; its output:\n${a.output()}`).toBe('SIGKILL');
      const leafWorker = children.worker({ ...FAST, leaseMs: 1500, concurrency: 8 });
      await leafWorker.start();
      expect(await parents.result(id, { timeout: '60s' })).toBe(((N * (N - 1)) / 2) * 10);
      await leafWorker.stop();
      await parentWorker.stop();
      const info = await parents.get(id);
      expect(info.children).toHaveLength(N);
      // No child was started twice; the dead worker recorded only steps `a` (it died in a `b`).
      expect((await parents.list({ workflow: 'crash-leaf', limit: 100 })).tasks).toHaveLength(N);
      const leafSteps = readLog(log).filter((l) => l.event === 'leaf-step');
      expect(leafSteps).toHaveLength(2 * N);
      expect(new Set(leafSteps.map((l) => l.key)).size).toBe(2 * N);
      expect(leafSteps.filter((l) => l.pid === a.pid).every((l) => l.key.endsWith(':a#1'))).toBe(true);
    } finally {
      await children.close();
      await parents.close();
    }
  }, 90_000);
});
