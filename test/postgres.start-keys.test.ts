// Debounced and singleton starts racing on PostgreSQL: several engines (each with its own pool of
// connections) start with one key at once, and workers claim while the starts go on. The partial
// unique indexes and row locks must leave exactly one task where the rules say one, and never
// change a task's input once a worker has claimed it.
import { describe, expect, it } from 'vitest';
import { Engine, ERROR_CODES, workflow, type Engine as EngineType, type TaskEvent } from '../src/index.ts';
import { PG_URL, hasPostgres, sql, withPg } from './support/postgres.ts';
import { debounceUpdateSql, liveSingletonSql } from '../src/postgres/keyed-starts.ts';
import { tablesOf } from '../src/postgres/sql-text.ts';
import { FAST, eventually, schemasOfThisFile } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_keys');
const echo = workflow('echo-race', async (_ctx, input: { n: number }) => input.n);

async function engines(count: number): Promise<{ schema: string; all: EngineType[]; close(): Promise<void> }> {
  const schema = freshSchema();
  const url = `${PG_URL}?schema=${schema}`;
  const all = Array.from({ length: count }, () => new Engine({ store: url, workflows: [echo], postgres: { poolSize: 4 } }));
  await all[0]!.ready();
  await Promise.all(all.map((e) => e.ready()));
  return { schema, all, close: async () => void (await Promise.all(all.map((e) => e.close()))) };
}

const inputOf = (e: TaskEvent): unknown => (e.type === 'task:debounced' ? e.input : undefined);

describe.skipIf(!(await hasPostgres()))('keyed starts racing on PostgreSQL', () => {
  it('100 debounced starts from 4 engines at once make one task, holding the input of the last start it recorded', async () => {
    const { schema, all, close } = await engines(4);
    try {
      const handles = await Promise.all(
        all.flatMap((engine, e) => Array.from({ length: 25 }, (_, i) => engine.start(echo, { n: e * 100 + i }, { debounce: { key: 'burst', period: '1h' } }))),
      );
      expect(new Set(handles.map((h) => h.id)).size).toBe(1);
      expect(handles.filter((h) => h.created)).toHaveLength(1);
      const counted = await sql<{ count: string }>(`SELECT count(*) FROM "${schema}".tasks`);
      expect(Number(counted[0]?.count)).toBe(1);
      const info = await all[0]!.get(handles[0]!.id);
      const entries = info.history.filter((x) => x.type === 'task:debounced');
      expect(entries).toHaveLength(99);
      // Seqs have no gaps, and the row holds the input of the last entry.
      expect(info.history.map((x) => x.seq)).toEqual(info.history.map((_, i) => i + 1));
      expect(info.input).toEqual(inputOf(entries.at(-1)!));
    } finally {
      await close();
    }
  }, 120_000);

  it('40 singleton starts from 4 engines at once create one task: the others are refused naming it, or join it', async () => {
    const { all, close } = await engines(4);
    try {
      const outcomes = await Promise.all(
        all.flatMap((engine, e) =>
          Array.from({ length: 10 }, (_, i) =>
            engine.start(echo, { n: e * 10 + i }, { singleton: 'one' }).then(
              (h) => ({ id: h.id, created: h.created }),
              (err: { code: string; runningTaskId: string }) => ({ code: err.code, running: err.runningTaskId }),
            ),
          ),
        ),
      );
      const created = outcomes.filter((o) => 'created' in o && o.created);
      expect(created).toHaveLength(1);
      const id = (created[0] as { id: string }).id;
      expect(outcomes.filter((o) => 'code' in o)).toEqual(Array.from({ length: 39 }, () => ({ code: ERROR_CODES.SINGLETON_RUNNING, running: id })));
      const joined = await Promise.all(all.flatMap((engine) => Array.from({ length: 5 }, () => engine.start(echo, { n: 0 }, { singleton: { key: 'one', mode: 'join' } }))));
      expect(joined.map((h) => [h.id, h.created])).toEqual(joined.map(() => [id, false]));
    } finally {
      await close();
    }
  }, 120_000);

  it('debounced starts racing with the claims of 4 workers never change a claimed task: each ran with its last recorded input', async () => {
    const { all, close } = await engines(4);
    try {
      await Promise.all(all.map((e) => e.worker({ ...FAST, pollIntervalMs: 5, concurrency: 4 }).start()));
      // A short period: tasks fall due while the starts go on, and workers claim them mid-stream.
      const handles = [];
      for (let round = 0; round < 30; round++) {
        handles.push(...(await Promise.all(all.map((engine, e) => engine.start(echo, { n: round * 10 + e }, { debounce: { key: 'stream', period: 1 } })))));
      }
      const ids = [...new Set(handles.map((h) => h.id))];
      const engine = all[0]!;
      for (const id of ids) await engine.result(id, { timeout: '30s' });
      for (const id of ids) {
        const info = await engine.get(id);
        const claim = info.history.findIndex((x) => x.type === 'transition' && x.event === 'claim');
        // Nothing changed its input after the claim, and it ran with the input it last recorded.
        expect(info.history.slice(claim).filter((x) => x.type === 'task:debounced')).toEqual([]);
        const before = info.history.slice(0, claim).filter((x) => x.type === 'task:debounced');
        expect(info.status === 'succeeded' && info.output).toBe((info.input as { n: number }).n);
        const create = info.history.find((x) => x.type === 'transition' && x.event === 'create');
        expect(create).toBeDefined();
        if (before.length) expect(inputOf(before.at(-1)!)).toEqual(info.input);
      }
      // Every start is accounted for: the creations plus the debounced entries.
      let recorded = 0;
      for (const id of ids) recorded += 1 + (await engine.get(id)).history.filter((x) => x.type === 'task:debounced').length;
      expect(recorded).toBe(handles.length);
      await eventually(async () => (await engine.list({ status: 'pending' })).tasks.length === 0, 10_000, 'no task left pending');
    } finally {
      await close();
    }
  }, 120_000);

  it('finds the task holding a debounce or singleton key through its partial index, not by scanning 20,000 tasks (generic plans)', async () => {
    const { schema, close } = await engines(1);
    await close();
    const t = tablesOf(schema);
    await withPg(async (c) => {
      // Half the tasks keyed (most of them ended or claimed), the rest without keys.
      await c.query(
        `INSERT INTO ${t.tasks} (id, workflow, workflow_version, status, runs, debounce_key, singleton_key, run_at, created_at, updated_at)
         SELECT 'task-' || lpad(g::text, 6, '0'), 'w', '1', CASE WHEN g % 100 = 0 THEN 'pending' ELSE 'succeeded' END,
           CASE WHEN g % 100 = 0 THEN 0 ELSE 1 END, CASE WHEN g % 2 = 0 THEN 'd' || g END, CASE WHEN g % 2 = 1 THEN 's' || g END, 1, 1, 1
         FROM generate_series(1, 20000) g`,
      );
      await c.query(`ANALYZE ${t.tasks}`);
      await c.query('SET plan_cache_mode = force_generic_plan');
      const plan = async (text: string, values: unknown[]): Promise<string> => {
        await c.query('BEGIN');
        try {
          await c.query(`PREPARE probe AS ${text}`);
          const r = await c.query(`EXPLAIN (FORMAT TEXT) EXECUTE probe(${values.map((v) => (v === null ? 'NULL' : c.escapeLiteral(String(v)))).join(', ')})`);
          return r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
        } finally {
          await c.query('ROLLBACK');
          await c.query('DEALLOCATE ALL');
        }
      };
      const update = await plan(debounceUpdateSql(t), ['{}', null, 5, 5, 'w', 'd200', 'task:debounced', 'user', 'a', '{}', null, null, null, 0]);
      expect(update).toMatch(/Index Scan using tasks_debounce/);
      expect(update).not.toMatch(/Seq Scan/);
      const live = await plan(liveSingletonSql(t), ['w', 's201']);
      expect(live).toMatch(/Index Scan using tasks_singleton/);
      expect(live).not.toMatch(/Seq Scan/);
    });
  }, 120_000);
});
