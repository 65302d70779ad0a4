// Rate limits across real worker processes: four `stepwise worker` processes on PostgreSQL, three
// on one SQLite file, share one limit through the store. No interval of the limit's length holds more calls than the limit,
// judged both by where each call's draw was placed (its place in the window, recorded by the store
// in the draw's transaction) and by the time each call started (a call starts only within the
// margin its draw was placed with, else it draws again); and a window is filled to the limit,
// with at least half the limit per window over the run (by the draws' places).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { eventually, schemasOfThisFile, tempDir } from './support/engine.ts';
import { spawnCli, type SpawnedWorker } from './support/processes.ts';
import { limitedCall } from './fixtures/rate-limit-workflows.ts';
import { busiestWindow, readCalls } from './support/rate-calls.ts';

const freshSchema = schemasOfThisFile('sw_rate_proc');
const FIXTURE = 'test/fixtures/rate-limit-workflows.ts';
const RATE = 10;
const PER_MS = 5000;

async function acrossProcesses(url: string, processes: number): Promise<void> {
  {
    const log = join(tempDir(), 'calls.jsonl');
    const engine = new Engine({ store: url, workflows: [limitedCall] });
    const env = { STEPWISE_TEST_LOG: log, STEPWISE_TEST_RATE: String(RATE), STEPWISE_TEST_PER: `${PER_MS}ms` };
    const workers: SpawnedWorker[] = [];
    try {
      await engine.ready();
      for (let i = 0; i < processes; i++) workers.push(spawnCli(['worker', FIXTURE, '--db', url, '--poll-ms', '50', '--concurrency', '8', '--quiet'], env));
      // Warm-up on a key of its own (processes loaded, connections open): the figures are the steady state's.
      const warm = 16;
      await engine.startMany(Array.from({ length: warm }, (_, n) => ({ workflow: 'limited-call', input: { n, key: 'warm-up' }, idempotencyKey: `warm-${n}` })));
      await eventually(async () => (await engine.count()).succeeded === warm, 120_000, 'the warm-up');
      const total = 40;
      await engine.startMany(Array.from({ length: total }, (_, n) => ({ workflow: 'limited-call', input: { n }, idempotencyKey: `call-${n}` })));
      await eventually(async () => (await engine.count()).succeeded === warm + total, 120_000, 'every task succeeded');
      const calls = readCalls(log).filter((c) => c.key === '');
      expect(new Set(calls.map((c) => c.task)).size).toBe(total);
      expect(calls.length).toBe(total);
      // More than one process took part.
      expect(new Set(calls.map((c) => c.pid)).size).toBeGreaterThan(1);
      for (const c of calls) expect(c.calledAt).toBeGreaterThanOrEqual(c.drawnAt);
      const drawn = calls.map((c) => c.drawnAt);
      expect(busiestWindow(drawn, PER_MS)).toBe(RATE);
      // The calls themselves, by the time each started: a call may start only within the margin its
      // draw was placed with (else it draws again), so no interval of the limit's length holds more.
      expect(
        busiestWindow(
          calls.map((c) => c.calledAt),
          PER_MS,
        ),
      ).toBeLessThanOrEqual(RATE);
      // Throughput: the busiest-window check above shows a window filled to the limit; over the whole
      // run the windows hold at least half the limit on average. The rest of the gap to the limit is
      // the time a parked step takes to wake and draw again, which a loaded machine stretches.
      const span = Math.max(...drawn) - Math.min(...drawn) + PER_MS;
      const perWindow = (total * PER_MS) / span;
      expect(perWindow).toBeGreaterThanOrEqual(0.5 * RATE);
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await engine.close();
    }
  }
}

const pg = await hasPostgres();

describe('rate limits across worker processes', () => {
  it.skipIf(!pg)(
    'four worker processes on PostgreSQL never put more than the limit in any window, and fill the windows',
    async () => {
      await acrossProcesses(`${PG_URL}?schema=${freshSchema()}`, 4);
    },
    180_000,
  );

  it('three worker processes on one SQLite file never put more than the limit in any window, and fill the windows', async () => {
    await acrossProcesses(`sqlite:${join(tempDir(), 'rate.db')}`, 3);
  }, 180_000);
});
