// Limits per key on PostgreSQL under racing claimers: four engines (four connection pools, four
// workers) claim from one schema at once; the tasks themselves count how many of their key run
// at once, and that never exceeds the limit. Then a claim behind 1,000 tasks of a full key
// still finds another key's task, and no slot is left behind. And starts from three engines racing
// the ends of leases of the same keys: every task runs, and none is left held behind its key.
import { describe, expect, it } from 'vitest';
import { Engine, workflow, type Worker } from '../src/index.ts';
import { PG_URL, hasPostgres, sql } from './support/postgres.ts';
import { FAST, eventually, gate, schemasOfThisFile } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_keys');

describe.skipIf(!(await hasPostgres()))('limits per key on PostgreSQL', () => {
  it('never runs more than `limit` tasks of a key at once with four engines claiming in parallel', async () => {
    const schema = freshSchema();
    const url = `${PG_URL}?schema=${schema}`;
    const running = new Map<string, number>();
    const most = new Map<string, number>();
    const wf = workflow(
      'keyed',
      async (ctx, input: { key: string }) =>
        ctx.step('work', async () => {
          const now = (running.get(input.key) ?? 0) + 1;
          running.set(input.key, now);
          most.set(input.key, Math.max(most.get(input.key) ?? 0, now));
          await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 8)));
          running.set(input.key, (running.get(input.key) ?? 1) - 1);
        }),
      { concurrency: { key: (input) => input.key, limit: 2 } },
    );
    const engines = Array.from({ length: 4 }, () => new Engine({ store: url, workflows: [wf] }));
    const workers: Worker[] = [];
    try {
      await engines[0]?.ready();
      const tasks = await (engines[0] as Engine).startMany(Array.from({ length: 240 }, (_, i) => ({ workflow: wf, input: { key: `k${i % 6}` } })));
      for (const e of engines) workers.push(e.worker({ ...FAST, pollIntervalMs: 5, concurrency: 8, claimBatch: 8 }));
      await Promise.all(workers.map((w) => w.start()));
      const first = engines[0] as Engine;
      await eventually(async () => (await first.count({ status: 'succeeded' })).succeeded === tasks.length, 120_000, 'all tasks done');
      expect(Math.max(...most.values())).toBe(2);
      expect(most.size).toBe(6);
      expect(await sql(`SELECT * FROM "${schema}".concurrency_slots`)).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(engines.map((e) => e.close()));
    }
  }, 180_000);

  it('starts racing the ends of leases: every task runs, in each key one at a time, and none is left held', async () => {
    const schema = freshSchema();
    const url = `${PG_URL}?schema=${schema}`;
    const running = new Map<string, number>();
    let most = 0;
    const wf = workflow(
      'raced',
      async (ctx, input: { key: string }) =>
        ctx.step('work', async () => {
          const now = (running.get(input.key) ?? 0) + 1;
          running.set(input.key, now);
          most = Math.max(most, now);
          await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 4)));
          running.set(input.key, now - 1);
        }),
      { concurrency: { key: (input) => input.key, limit: 1 } },
    );
    const engines = Array.from({ length: 3 }, () => new Engine({ store: url, workflows: [wf] }));
    const workers: Worker[] = [];
    try {
      await engines[0]?.ready();
      for (const e of engines) workers.push(e.worker({ ...FAST, pollIntervalMs: 5, concurrency: 4, claimBatch: 4 }));
      await Promise.all(workers.map((w) => w.start()));
      // Starts from every engine while the workers end leases of the same keys: a start that
      // decides from a snapshot older than a lease's end is released by the release pass.
      const started: string[] = [];
      for (let round = 0; round < 20; round++) {
        const batches = engines.map((e, i) => e.startMany(Array.from({ length: 3 }, (_, j) => ({ workflow: wf, input: { key: `k${(round + i + j) % 3}` } }))));
        for (const tasks of await Promise.all(batches)) started.push(...tasks.map((t) => t.id));
        await new Promise((r) => setTimeout(r, 3));
      }
      const first = engines[0] as Engine;
      await eventually(async () => (await first.count({ status: 'succeeded' })).succeeded === started.length, 120_000, 'all tasks done');
      expect(most).toBe(1);
      expect(await sql(`SELECT id FROM "${schema}".tasks WHERE held_by_key`)).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(engines.map((e) => e.close()));
    }
  }, 180_000);

  it('finds a runnable task behind 1,000 tasks of a key at its limit, which wait held, out of the claim’s index', async () => {
    const schema = freshSchema();
    const held = gate();
    const wf = workflow('queued', async (ctx, input: { key: string; hold?: boolean }) => ctx.step('work', async () => void (input.hold ? await held.promise : undefined)), {
      concurrency: { key: (input) => input.key, limit: 1 },
    });
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [wf] });
    const worker = engine.worker({ ...FAST, concurrency: 4, claimBatch: 2 });
    try {
      const first = await engine.start(wf, { key: 'busy', hold: true });
      await worker.start();
      await eventually(async () => (await engine.get(first.id)).status === 'running', 20_000, 'the first task running');
      await engine.startMany(Array.from({ length: 1000 }, () => ({ workflow: wf, input: { key: 'busy' } })));
      const other = await engine.start(wf, { key: 'free' });
      expect(await engine.result(other.id, { timeout: '20s' })).toBeUndefined();
      expect((await engine.count({ status: 'pending' })).pending).toBe(1000);
      expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".tasks WHERE held_by_key`)).toEqual([{ n: 1000 }]);
      expect(await sql(`SELECT key FROM "${schema}".concurrency_slots`)).toEqual([{ key: 'queued:busy' }]);
      held.open();
    } finally {
      await worker.stop();
      await engine.close();
    }
  }, 120_000);
});
