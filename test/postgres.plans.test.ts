// The PostgreSQL store's frequent statements do work in proportion to what they touch, not to the
// size of the tasks table, whatever the planner's statistics say: each is prepared with a generic
// plan (as the store runs them) on a table of 30,000 tasks and executed under EXPLAIN ANALYZE.
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { stepBatchSql } from '../src/postgres/batch-sql.ts';
import { claimUncappedSql } from '../src/postgres/claim.ts';
import { claimPlan } from '../src/worker/claiming.ts';
import { transitionBatchSql } from '../src/postgres/transition-batch-sql.ts';
import { DB_NOW_MS, heartbeatSql, leasedCountSql, nextDueSql, plainStepSql, resultStepSql, tablesOf } from '../src/postgres/sql-text.ts';
import { stepValues } from '../src/rows.ts';
import { transitionEntry } from '../src/log-entries.ts';
import type { StepWrite, TransitionWrite } from '../src/store.ts';
import { countTasksSql, deleteTasksSql } from '../src/postgres/retention.ts';
import { ALL_STATUSES } from '../src/lifecycle.ts';
import { PG_URL, hasPostgres, withPg } from './support/postgres.ts';
import { PROBE_NOW, explain, probeId, probeStep, type PlanNode } from './support/plans.ts';
import { schemasOfThisFile } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_plans');

const TASKS = 30_000;
const RUNNING = 3_000; // every 10th task
const PENDING = 500; // due later, beyond the running ones
const NOW = PROBE_NOW;

/** Rows of the tasks table and of their heads (or entries of their indexes) that the plan read, and how it read them. */
function tasksWork(node: PlanNode, acc = { rows: 0, access: new Set<string>() }): { rows: number; access: Set<string> } {
  const onTasks = node['Relation Name'] === 'tasks' || node['Relation Name'] === 'task_heads' || /^tasks_|^task_heads_/.test(node['Index Name'] ?? '');
  if (onTasks && /Scan/.test(node['Node Type'])) {
    const perLoop = node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0);
    acc.rows += perLoop * node['Actual Loops'];
    acc.access.add(node['Index Name'] ? `${node['Node Type']} ${node['Index Name']}` : node['Node Type']);
  }
  for (const child of node.Plans ?? []) tasksWork(child, acc);
  return acc;
}

const id = probeId;
const runningIds = (k: number): string[] => Array.from({ length: k }, (_, i) => id((i + 1) * 10 * Math.floor(RUNNING / k)));
const step = probeStep;

describe.skipIf(!(await hasPostgres()))('PostgreSQL statement plans', () => {
  for (const stats of ['analyzed while empty, then loaded', 'analyzed once loaded', 'analyzed while none ran, then 3,000 running'] as const) {
    it(`finds tasks by key, not by scanning the table, on 30,000 tasks ${stats}`, async () => {
      const schema = freshSchema();
      const engine = new Engine({ store: `${PG_URL}?schema=${schema}` });
      await engine.ready();
      await engine.close();
      const t = tablesOf(schema);
      await withPg(async (c) => {
        if (stats === 'analyzed while empty, then loaded') await c.query(`ANALYZE ${t.tasks}; ANALYZE ${t.heads}`);
        await c.query(
          `INSERT INTO ${t.tasks} (id, workflow, workflow_version, status, epoch, lease_owner, lease_expires_at, run_at, created_at, updated_at, finished_at)
           SELECT 'task-' || lpad(g::text, 6, '0'), 'w', '1',
             CASE WHEN g % 10 = 0 AND NOT $4 THEN 'running' WHEN g > $1 - $2 THEN 'pending' ELSE 'succeeded' END, 1,
             CASE WHEN g % 10 = 0 THEN 'worker-a' END, CASE WHEN g % 10 = 0 THEN ${DB_NOW_MS} + 60000 END,
             CASE WHEN g % 10 <> 0 AND g > $1 - $2 THEN $3 + g END, 1, 1,
             CASE WHEN g % 10 <> 0 AND g <= $1 - $2 THEN g END
           FROM generate_series(1, $1) g`,
          [TASKS, PENDING, NOW, stats === 'analyzed while none ran, then 3,000 running'],
        );
        await c.query(`INSERT INTO ${t.heads} (id, status, epoch, lease_owner, event_seq) SELECT id, status, epoch, lease_owner, 0 FROM ${t.tasks}`);
        if (stats !== 'analyzed while empty, then loaded') await c.query(`ANALYZE ${t.tasks}; ANALYZE ${t.heads}`);
        if (stats === 'analyzed while none ran, then 3,000 running') {
          await c.query(`UPDATE ${t.tasks} SET status = 'running' WHERE lease_owner IS NOT NULL`);
          await c.query(`UPDATE ${t.heads} SET status = 'running' WHERE lease_owner IS NOT NULL`);
        }
        await c.query('SET plan_cache_mode = force_generic_plan');

        const ids = runningIds(40);
        const steps: StepWrite[] = ids.map((taskId) => ({ kind: 'step', taskId, epoch: 1, step: step(taskId, 0) }));
        const transitions: TransitionWrite[] = ids.map((taskId) => ({
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
        const stepBatch = stepBatchSql(t, steps);
        const transitionBatch = transitionBatchSql(t, transitions, () => 'probe_channel');
        // The same ends as children's, each with its signal to one of 4 parents (tasks 1…4).
        const childEnds = transitionBatchSql(
          t,
          transitions.map((w, k) => ({ ...w, parentSignal: { taskId: id(1 + (k % 4)), name: `child:${w.taskId}` } })),
          () => 'probe_channel',
        );
        const plain = [...stepValues(step(ids[0]!, 1)), ids[0], 1, NOW, 'step:completed', '{}'];
        // A worker's poll when nothing is due and no lease has expired (3,000 are live).
        const idlePoll = claimUncappedSql(t, {
          ...claimPlan(new Map([['w', workflow('w', async () => undefined)]])),
          workerId: 'worker-b',
          now: NOW,
          leaseMs: 30_000,
          limit: 256,
        });
        if (!idlePoll) throw new Error('the claim plan claims from no status');
        const cases: Array<{ name: string; text: string; values: unknown[]; rows: number; most: number }> = [
          // Each head twice: locked in id order, then its log counter updated (as the heartbeat does); no task row.
          { name: 'batched checkpoints', text: stepBatch.text, values: stepBatch.values, rows: 40, most: 2 * 40 },
          // Each task row twice (locked in id order, then updated), and its head twice.
          { name: 'batched end-of-run transitions', text: transitionBatch.text, values: transitionBatch.values, rows: 40, most: 4 * 40 },
          // And each parent's row and head twice: locked (once for all its children), then updated.
          { name: "batched ends of children, with their parents' signals", text: childEnds.text, values: childEnds.values, rows: 40, most: 4 * 40 + 4 * 4 },
          { name: 'lone checkpoint', text: plainStepSql(t), values: plain, rows: 1, most: 1 },
          // The same at a position the run knows to be free: a plain insert (the hot path).
          { name: 'lone checkpoint at a free position', text: plainStepSql(t, 'fresh'), values: [...stepValues(step(ids[0]!, 4)), ids[0], 1, NOW, 'step:completed', '{}'], rows: 1, most: 1 },
          // An INSERT without RETURNING reports no rows of its own (its row count says it wrote one).
          { name: 'lone step result', text: resultStepSql(t), values: [...stepValues(step(ids[0]!, 2)), ids[0], 1], rows: 0, most: 1 },
          { name: 'lone step result at a free position', text: resultStepSql(t, 'fresh'), values: [...stepValues(step(ids[0]!, 5)), ids[0], 1], rows: 0, most: 1 },
          // Sent again after a lost answer: the position's row looked up by key, compared, and taken as the write.
          { name: 'lone checkpoint sent again', text: plainStepSql(t, 'again'), values: plain, rows: 1, most: 2 },
          { name: 'lone step result sent again', text: resultStepSql(t, 'again'), values: [...stepValues(step(ids[0]!, 2)), ids[0], 1], rows: 1, most: 2 },
          // Expired leases are found by the lease index's range up to now, not by reading every live lease.
          { name: 'claim with nothing due', text: idlePoll.text, values: idlePoll.values, rows: 0, most: 10 },
          { name: 'heartbeat', text: heartbeatSql(t), values: [60000, ids, ids.map(() => 1), 'worker-a'], rows: 40, most: 2 * 40 },
          // Bounded by the pending or leased tasks, which the due and leased indexes list (a bitmap
          // scan counts each twice: its index entries and its rows; the probes above left row versions).
          { name: 'next due time', text: nextDueSql(t), values: [NOW, ['w']], rows: 1, most: 2 * PENDING },
          { name: 'leased count of a capped workflow', text: leasedCountSql(t), values: [['w']], rows: 1, most: 2 * RUNNING + 200 },
        ];
        for (const k of cases) {
          const plan = await explain(c, k.text, k.values);
          const work = tasksWork(plan);
          const how = `${k.name}: read ${work.rows} rows of tasks by ${[...work.access].join(', ')}`;
          expect(plan['Actual Rows'], how).toBe(k.rows);
          expect(
            [...work.access].filter((a) => /Seq Scan|tasks_workflow/.test(a)),
            how,
          ).toEqual([]);
          expect(work.rows, how).toBeLessThanOrEqual(k.most);
        }
        // A retention sweep reads the tasks created before its cutoff (ids below the bound), by an
        // index, whether or not it names the workflows: not the table. Tasks 1…1000 are old, 90% of
        // them succeeded (finished at their number); the sweep deletes those that finished before 500.
        const sweeps: Array<{ name: string; statuses: Array<'succeeded' | 'failed'>; workflows?: string[]; rows: number; most: number }> = [
          // (+ 40: the probes above updated 40 tasks, some in this range, each leaving the index entry of its old version.)
          { name: 'sweep of succeeded tasks', statuses: ['succeeded'], rows: 450, most: 2 * 1000 + 40 },
          // A bitmap scan may combine the workflow and id indexes: each entry read, then each row.
          { name: "sweep of one workflow's succeeded tasks", statuses: ['succeeded'], workflows: ['w'], rows: 450, most: 3 * 1000 },
          { name: 'sweep of failed tasks (none)', statuses: ['failed'], rows: 0, most: 10 },
        ];
        for (const k of sweeps) {
          // The statement that picks (and locks) them: the scan.
          const sweep = deleteTasksSql(t, { statuses: k.statuses, finishedBefore: 500, idBefore: id(1001), ...(k.workflows ? { workflows: k.workflows } : {}) }, 1000);
          const plan = await explain(c, sweep.pick.text, sweep.pick.values);
          const work = tasksWork(plan);
          const how = `${k.name}: read ${work.rows} rows of tasks by ${[...work.access].join(', ')}`;
          expect(plan['Actual Rows'], how).toBe(k.rows);
          expect(
            [...work.access].filter((a) => /Seq Scan/.test(a)),
            how,
          ).toEqual([]);
          expect(work.rows, how).toBeLessThanOrEqual(k.most);
        }
        // The delete of the picked tasks looks each of them up by its key (the journal and log
        // tables are empty here, where any plan of them is as good).
        const picked = Array.from({ length: 100 }, (_, i) => id(i * 7 + 1));
        const deletion = tasksWork(await explain(c, deleteTasksSql(t, { statuses: ['succeeded'] }, 100).delete, [picked]));
        const deletionHow = `delete of 100 picked tasks: read ${deletion.rows} rows of tasks by ${[...deletion.access].join(', ')}`;
        expect(
          [...deletion.access].filter((a) => /Seq Scan/.test(a)),
          deletionHow,
        ).toEqual([]);
        expect(deletion.rows, deletionHow).toBeLessThanOrEqual(2 * 100 + 3 * 100); // the tasks; their heads locked in id order, then deleted
        // Counting every status up to a cap (the metrics' scrape) reads about the cap per status; a
        // leased status may be looked for among the leased tasks (the leased index lists both).
        const count = countTasksSql(t, { statuses: ALL_STATUSES }, 100);
        const counted = await explain(c, count.text, count.values);
        const countWork = tasksWork(counted);
        const countHow = `capped count: read ${countWork.rows} rows of tasks by ${[...countWork.access].join(', ')}`;
        expect(counted['Actual Rows'], countHow).toBe(ALL_STATUSES.length);
        expect([...countWork.access].filter((a) => a === 'Seq Scan').length, countHow).toBeLessThanOrEqual(1); // succeeded: the bulk, found at once
        expect(countWork.rows, countHow).toBeLessThanOrEqual(ALL_STATUSES.length * 250 + RUNNING);
        // The probes themselves were rolled back.
        expect((await c.query(`SELECT count(*)::int AS n FROM ${t.steps}`)).rows[0].n).toBe(0);
      });
    });
  }
});
