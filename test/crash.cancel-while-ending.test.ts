// A cancel that commits inside the last step of a task run by a separate worker process (the CLI's
// `stepwise worker`), which does not hear of it before its final write: the cancel wins, and the
// cleanup (onCancel handler, compensations of the three bookings) runs once, with the cancel's
// reason. On SQLite and PostgreSQL.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { sagaEnding } from './fixtures/cancel-ending-workflows.ts';
import { eventually, schemasOfThisFile, tempDir, transitionsOf, waitForStatus } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { readLog, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/cancel-ending-workflows.ts';
const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_cancel_end');
const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'ending.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL test of a cancel as a run ends is skipped.');

describe.each(stores)('a cancel that commits inside the last step of a worker process ($name)', ({ url: makeUrl }) => {
  it('wins with its cleanup: the onCancel handler with its reason, and each booking undone once', async () => {
    const url = makeUrl();
    const log = join(tempDir(), 'effects.log');
    const engine = new Engine({ store: url, workflows: [sagaEnding] });
    // The heartbeat that would bring the cancel is far off: the worker ends the run before hearing.
    const worker = spawnCli(['worker', FIXTURE, '--db', url, '--lease-ms', '30000', '--heartbeat-ms', '10000', '--poll-ms', '50'], { STEPWISE_TEST_LOG: log });
    try {
      const { id } = await engine.start(sagaEnding);
      await eventually(() => readLog(log).some((l) => l.event === 'car-start'), 30_000, 'the worker to start the last step');
      expect((await engine.cancel(id, { reason: 'customer left' })).status).toBe('cancelling');
      appendFileSync(log, `${JSON.stringify({ event: 'cancel-committed', key: '', pid: process.pid, at: Date.now() })}\n`);
      await waitForStatus(engine, id, ['cancelled', 'failed', 'succeeded'], 30_000);
      const info = await engine.get(id);
      expect(info.status).toBe('cancelled');
      const events = readLog(log).map((l) => l.event);
      expect(events.filter((e) => e.startsWith('book-'))).toEqual(['book-flight', 'book-hotel', 'book-car']);
      expect(events.filter((e) => e === 'onCancel' || (e.startsWith('cancel-') && e !== 'cancel-committed'))).toEqual(['onCancel', 'cancel-car', 'cancel-hotel', 'cancel-flight']);
      expect(readLog(log).find((l) => l.event === 'onCancel')).toMatchObject({ reason: 'customer left' });
      expect(transitionsOf(info).find((t) => t.event === 'abort')?.detail).toEqual({ reason: 'customer left' });
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await engine.close();
    }
  });
});
