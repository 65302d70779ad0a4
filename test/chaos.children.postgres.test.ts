// Chaos with child tasks: three worker processes on one PostgreSQL database serve parents and
// children alike; 200 parents fan out to 10 children each while, for 15 seconds, a random worker is
// killed with SIGKILL every second or so (and restarted). Then: every parent succeeded with every
// child's output, no child was started twice, and every child step ran (a step killed between its
// effect and its checkpoint may run again, but only in a process that was killed).
// STEPWISE_CHAOS_PARENTS and STEPWISE_CHAOS_CHILDREN run it at another scale.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { crashParent } from './fixtures/child-parent-workflows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { readLog, spawnCli, type SpawnedWorker } from './support/processes.ts';
import { tempDir } from './support/engine.ts';

function scale(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new Error(`${name} must be a whole number ≥ 1, got "${v}"`);
  return Number(v);
}
const PARENTS = scale('STEPWISE_CHAOS_PARENTS', 200);
const CHILDREN = scale('STEPWISE_CHAOS_CHILDREN', 10);
/** Time for the tasks to finish after the chaos (200 × 10 took 21 s alone on the 2-core machine). */
const FINISH_MS = 90_000 + PARENTS * CHILDREN * 100;
const WORKERS = 3;
const CHAOS_MS = 15_000;

const schema = freshSchemaName('sw_chaos_child');
afterAll(async () => dropSchema(schema));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const between = (a: number, b: number): number => a + Math.floor(Math.random() * (b - a));

describe.skipIf(!(await hasPostgres()))('chaos with child tasks on PostgreSQL', () => {
  it(
    'parents and children survive random SIGKILLs across three workers: every parent finishes with all results, no child twice',
    async () => {
      const db = `${PG_URL}?schema=${schema}`;
      const log = join(tempDir(), 'steps.log');
      const engine = new Engine({ store: db, workflows: [crashParent] });
      const spawned: SpawnedWorker[] = [];
      try {
        await engine.ready();
        const ids: string[] = [];
        for (let n = 0; n < PARENTS; n++) ids.push((await engine.start(crashParent, { n: CHILDREN })).id);
        const args = ['worker', 'test/fixtures/child-all-workflows.ts', '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '300', '--poll-ms', '100', '--concurrency', '8'];
        const spawnOne = (): SpawnedWorker => {
          const w = spawnCli(args, { STEPWISE_TEST_LOG: log });
          spawned.push(w);
          return w;
        };
        const slots = Array.from({ length: WORKERS }, spawnOne);
        const killed = new Set<number>();
        const started = Date.now();
        while (Date.now() - started < CHAOS_MS) {
          await sleep(between(700, 1400));
          const i = between(0, WORKERS);
          const victim = slots[i] as SpawnedWorker;
          victim.child.kill('SIGKILL');
          await victim.exited;
          killed.add(victim.pid);
          slots[i] = spawnOne();
        }
        const expected = ((CHILDREN * (CHILDREN - 1)) / 2) * 10;
        const finishing = Date.now();
        for (const id of ids) expect(await engine.result(id, { timeout: Math.max(1000, FINISH_MS - (Date.now() - finishing)) })).toBe(expected);
        console.log(`[chaos.children] ${PARENTS} parents × ${CHILDREN} children: all finished ${Date.now() - finishing} ms after the chaos ended (${killed.size} SIGKILLs)`);
        // Exactly PARENTS × CHILDREN children: a parent resumed after a kill found the ones it had started.
        let children = 0;
        for (const id of ids) {
          const info = await engine.get(id, { history: false });
          expect(info.children).toHaveLength(CHILDREN);
          expect(info.children.every((c) => c.status === 'succeeded')).toBe(true);
          children += info.children.length;
        }
        expect((await engine.count({ workflow: 'crash-leaf' })).succeeded).toBe(children);
        // Every child step ran; a step that ran twice did so only because a process running it was killed.
        const steps = readLog(log).filter((l) => l.event === 'leaf-step');
        const byKey = new Map<string, number[]>();
        for (const l of steps) byKey.set(l.key, [...(byKey.get(l.key) ?? []), l.pid]);
        expect(byKey.size).toBe(PARENTS * CHILDREN * 2);
        for (const [key, pids] of byKey)
          if (pids.length > 1)
            expect(
              pids.slice(0, -1).every((p) => killed.has(p)),
              `${key} ran in ${pids.join(', ')}`,
            ).toBe(true);
      } finally {
        for (const w of spawned) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
        await engine.close();
      }
    },
    90_000 + FINISH_MS,
  );
});
