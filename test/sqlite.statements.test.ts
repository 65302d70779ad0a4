// The SQLite store's statements per task of a worker draining a backlog: a claim, each checkpoint
// and the end of the run share their transactions, and none of them reads what it can know (the
// log's last seq comes back with the claim; a transition's guard is its UPDATE's WHERE; a new
// journal row is inserted without reading it first). Counted on the worker's own connection.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { SqliteStore } from '../src/sqlite/store.ts';
import { eventually, tempDir } from './support/engine.ts';

const threeSteps = workflow('three-steps', async (ctx) => {
  await ctx.step('a', () => 1);
  await ctx.step('b', () => 2);
  await ctx.step('c', () => 3);
  return 3;
});

/** Counts every statement run on `store`'s connection (prepared statements and exec). */
function countStatements(store: SqliteStore): { count: () => number; texts: Map<string, number> } {
  const db = store.db;
  const texts = new Map<string, number>();
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    const s = prepare(sql);
    for (const m of ['run', 'get', 'all'] as const) {
      const f = s[m].bind(s) as (...a: unknown[]) => unknown;
      (s as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
        texts.set(sql, (texts.get(sql) ?? 0) + 1);
        return f(...a);
      };
    }
    return s;
  }) as typeof db.prepare;
  return { count: () => [...texts.values()].reduce((a, b) => a + b, 0), texts };
}

describe('SQLite statements per task', () => {
  it('a worker draining tasks of three steps runs at most 8 statements per task', async () => {
    const path = join(tempDir(), 'statements.db');
    const submitter = new Engine({ store: `sqlite:${path}`, workflows: [threeSteps] });
    const inner = new SqliteStore(path);
    const engine = new Engine({ store: inner, workflows: [threeSteps] });
    try {
      await submitter.ready();
      await engine.ready();
      const tasks = 64;
      const ids: string[] = [];
      for (let i = 0; i < tasks; i++) ids.push((await submitter.start(threeSteps)).id);
      const counted = countStatements(inner);
      // No heartbeat or sweep during the drain: only the runs' own statements are counted.
      const worker = engine.worker({ concurrency: tasks, leaseMs: 600_000, heartbeatMs: 200_000, dwellScanMs: 600_000, pollIntervalMs: 60_000 });
      await worker.start();
      await eventually(async () => (await Promise.all(ids.map((id) => submitter.get(id)))).every((t) => t.status === 'succeeded'), 30_000, 'all tasks succeeded');
      const perTask = counted.count() / tasks;
      await worker.stop();
      const detail = [...counted.texts].map(([sql, n]) => `${n} × ${sql.replace(/\s+/g, ' ').slice(0, 90)}`).join('\n');
      expect(perTask, detail).toBeLessThanOrEqual(8);
      // The log of every task is whole: created, claimed, three step results, completed, in seq order.
      const info = await submitter.get(ids[0] as string);
      expect(info.history.map((h) => (h.type === 'transition' ? h.event : h.type))).toEqual(['create', 'claim', 'step:completed', 'step:completed', 'step:completed', 'complete']);
      expect(info.history.map((h) => h.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    } finally {
      await engine.close();
      await submitter.close();
    }
  });
});
