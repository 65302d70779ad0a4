// A schedule firing every second for 60 s on PostgreSQL, with three worker processes of which one
// is SIGKILLed (and replaced) every few seconds: every tick in the span starts exactly one task.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { schemasOfThisFile, tempDir } from './support/engine.ts';
import { spawnCli, type SpawnedWorker } from './support/processes.ts';

const freshSchema = schemasOfThisFile('sw_sched_crash');
const FIXTURE = 'test/fixtures/schedule-workflows.ts';
const SPAN_MS = 60_000;

describe.skipIf(!(await hasPostgres()))('schedules under SIGKILL (PostgreSQL, real processes)', () => {
  it('starts exactly one task per tick, none missing and none twice, while workers are killed at random', async () => {
    const url = `${PG_URL}?schema=${freshSchema()}`;
    const log = join(tempDir(), 'effects.jsonl');
    const engine = new Engine({ store: url });
    const workers: SpawnedWorker[] = [];
    const spawn = (): SpawnedWorker => {
      const w = spawnCli(['worker', FIXTURE, '--db', url, '--poll-ms', '50', '--lease-ms', '3000', '--heartbeat-ms', '500', '--quiet'], { STEPWISE_TEST_LOG: log });
      workers.push(w);
      return w;
    };
    try {
      await engine.ready();
      const live = [spawn(), spawn(), spawn()];
      const created = await engine.schedules.create({ id: 'tick', workflow: 'every-second', cron: '* * * * * *', overlap: 'allow', catchup: '10m' });
      const first = created.nextRunAt as number;
      let kills = 0;
      const end = Date.now() + SPAN_MS;
      while (Date.now() < end) {
        await new Promise((r) => setTimeout(r, 1500 + Math.random() * 3000));
        const i = Math.floor(Math.random() * live.length);
        live[i]!.child.kill('SIGKILL');
        await live[i]!.exited;
        kills++;
        live[i] = spawn();
      }
      await engine.schedules.pause('tick');
      // A worker that was firing when the schedule was paused may have created the next tick's
      // task and not yet recorded it on the schedule: let it finish before reading both.
      await new Promise((r) => setTimeout(r, 4000));
      const schedule = await engine.schedules.get('tick');
      const { tasks } = await engine.list({ limit: 1000 });
      const ticks = tasks.map((t) => Number(/:(\d+)$/.exec(t.idempotencyKey ?? '')?.[1])).sort((a, b) => a - b);
      // The last tick recorded on the schedule, or the one a killed worker created and never recorded.
      const last = Math.max(schedule.lastRunAt as number, ticks.at(-1) ?? 0);
      expect(last - (schedule.lastRunAt as number)).toBeLessThanOrEqual(1000);
      // Every tick from the first to the last fired has one task, named by its key.
      const expected = Math.round((last - first) / 1000) + 1;
      expect(kills).toBeGreaterThanOrEqual(10);
      expect(expected).toBeGreaterThanOrEqual(50);
      expect(schedule.skipped).toBe(0);
      expect(ticks.length).toBe(expected);
      expect(new Set(ticks).size).toBe(expected);
      expect(ticks[0]).toBe(first);
      expect(ticks.at(-1)).toBe(last);
      for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await engine.close();
    }
  }, 180_000);
});
