// A batched statement of the PostgreSQL store does work in proportion to its batch: no join of
// the statement compares each of its rows with each other. The planner estimates one row for a
// CTE that updates rows, so a join of two such CTEs of 200 rows each becomes a nested loop of
// 40,000 comparisons; each statement is run on batches of 200 tasks under EXPLAIN ANALYZE, as the
// store runs it (a generic plan), and every join node's comparisons are counted.
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { stepBatchSql } from '../src/postgres/batch-sql.ts';
import { claimUncappedSql } from '../src/postgres/claim.ts';
import type { PgContext } from '../src/postgres/connection.ts';
import { insertSql, insertValues } from '../src/postgres/insert.ts';
import { transitionBatchSql } from '../src/postgres/transition-batch-sql.ts';
import { DB_NOW_MS, tablesOf } from '../src/postgres/sql-text.ts';
import { transitionEntry } from '../src/log-entries.ts';
import type { NewTask, StepRow, StepWrite, TransitionWrite } from '../src/store.ts';
import { PG_URL, hasPostgres, withPg } from './support/postgres.ts';
import { explain, type PlanNode } from './support/plans.ts';
import { schemasOfThisFile } from './support/engine.ts';
import { claimOf } from './support/claims.ts';

const freshSchema = schemasOfThisFile('sw_joins');

const BATCH = 200;
const NOW = 1_000_000;

/** The join nodes of a plan, each with the pairs of rows it compared (rows it kept and rows its join filter removed, over all its loops). */
function joins(node: PlanNode, acc: Array<{ node: string; compared: number }> = []): Array<{ node: string; compared: number }> {
  if (/Nested Loop|Hash Join|Merge Join/.test(node['Node Type'])) {
    acc.push({ node: `${node['Node Type']} ${node['Join Filter'] ?? ''}`.trim(), compared: (node['Actual Rows'] + (node['Rows Removed by Join Filter'] ?? 0)) * node['Actual Loops'] });
  }
  for (const child of node.Plans ?? []) joins(child, acc);
  return acc;
}

const id = (n: number): string => `task-${String(n).padStart(6, '0')}`;
const step = (taskId: string, seq: number): StepRow => ({
  taskId,
  seq,
  name: `s${seq}`,
  kind: 'step',
  status: 'completed',
  output: '1',
  error: null,
  attempts: 1,
  startedAt: NOW,
  finishedAt: NOW,
  wakeAt: null,
  epoch: 1,
  done: null,
  calledAfter: null,
  businessKey: null,
});

describe.skipIf(!(await hasPostgres()))('PostgreSQL batched statements', () => {
  it(`compare rows in proportion to a batch of ${BATCH} tasks, not to its square`, async () => {
    const schema = freshSchema();
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}` });
    await engine.ready();
    await engine.close();
    const t = tablesOf(schema);
    await withPg(async (c) => {
      // Tasks 1…4 are parents; 5…204 run under worker-a at epoch 1; 205…404 are due.
      await c.query(
        `INSERT INTO ${t.tasks} (id, workflow, workflow_version, status, epoch, lease_owner, lease_expires_at, run_at, created_at, updated_at)
         SELECT 'task-' || lpad(g::text, 6, '0'), 'wf', '1', CASE WHEN g > $1 + 4 THEN 'pending' ELSE 'running' END,
           CASE WHEN g > $1 + 4 THEN 0 ELSE 1 END, CASE WHEN g <= $1 + 4 THEN 'worker-a' END,
           CASE WHEN g <= $1 + 4 THEN ${DB_NOW_MS} + 60000 END, $2, 1, 1
         FROM generate_series(1, 2 * $1 + 4) g`,
        [BATCH, NOW],
      );
      await c.query(`INSERT INTO ${t.heads} (id, status, epoch, lease_owner, event_seq) SELECT id, status, epoch, lease_owner, 1 FROM ${t.tasks}`);
      await c.query(`ANALYZE ${t.tasks}; ANALYZE ${t.heads}`);
      await c.query('SET plan_cache_mode = force_generic_plan');

      const running = Array.from({ length: BATCH }, (_, k) => id(k + 5));
      const steps: StepWrite[] = running.map((taskId) => ({ kind: 'step', taskId, epoch: 1, step: step(taskId, 0) }));
      const ends: TransitionWrite[] = running.map((taskId) => ({
        kind: 'transition',
        taskId,
        event: 'succeed',
        from: ['running'],
        to: 'succeeded',
        guard: { epoch: 1 },
        set: { output: '3', clearLease: true, finishedAt: NOW },
        at: NOW,
        workerId: 'worker-a',
        steps: [step(taskId, 3)],
        log: [transitionEntry('worker', 'worker-a', { event: 'succeed', from: 'running', to: 'succeeded', output: '3' })],
      }));
      const childEnds = ends.map((w, k) => ({ ...w, parentSignal: { taskId: id(1 + (k % 4)), name: `child:${w.taskId}` } }));
      const claim = claimUncappedSql(t, claimOf('worker-b', NOW, BATCH));
      // Starts batched into one statement (the parts of the store its text and values read).
      const ctx = { t, channel: 'probe_channel', settledChannel: 'probe_done' } as PgContext;
      const starts: NewTask[] = Array.from({ length: BATCH }, (_, k) => ({
        id: id(100_000 + k),
        workflow: 'wf',
        workflowVersion: '1',
        input: 'null',
        idempotencyKey: null,
        runAt: NOW,
        createdAt: NOW,
        status: 'pending',
        log: transitionEntry('user', 'client', { event: 'create', from: null, to: 'pending' }),
      }));
      const cases = [
        { name: 'batched checkpoints', ...stepBatchSql(t, steps), rows: BATCH },
        { name: 'batched end-of-run transitions', ...transitionBatchSql(t, ends, () => 'probe_channel'), rows: BATCH },
        { name: "batched ends of children, with their parents' signals", ...transitionBatchSql(t, childEnds, () => 'probe_channel'), rows: BATCH },
        { name: 'a claim of a batch of due tasks', text: claim!.text, values: claim!.values, rows: BATCH },
        { name: 'a batch of starts', text: insertSql(ctx, false), values: insertValues(ctx, starts, undefined), rows: BATCH },
      ];
      for (const k of cases) {
        const plan = await explain(c, k.text, k.values);
        expect(plan['Actual Rows'], k.name).toBe(k.rows);
        const found = joins(plan);
        const worst = found.reduce((a, b) => (b.compared > a.compared ? b : a), { node: 'none', compared: 0 });
        // A hash join or an index lookup per row compares about one row per row of the batch (a
        // child's end also reaches its parent's rows): a few times the batch, against 40,000.
        expect(worst.compared, `${k.name}: the ${worst.node} compared ${worst.compared} pairs of rows`).toBeLessThanOrEqual(4 * BATCH);
      }
    });
  });
});
