// A batched statement of the PostgreSQL store does work in proportion to its batch: no part of
// the statement goes over the batch once per row of it. The planner estimates one row for a CTE
// that updates rows, so a join of two such CTEs of 200 rows each becomes a nested loop of 40,000
// comparisons, and a subquery beside such a CTE is run again for each of its rows. Each statement
// is run on batches of 200 tasks under EXPLAIN ANALYZE, as the store runs it (a generic plan), and
// the rows every node of its plan handled, over all its loops, are counted.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/index.ts';
import { stepBatchSql } from '../src/postgres/batch-sql.ts';
import { cappedTakeSql, claimUncappedSql } from '../src/postgres/claim.ts';
import type { PgContext } from '../src/postgres/connection.ts';
import { expireLeasesSql } from '../src/postgres/leases.ts';
import { insertSql, insertValues } from '../src/postgres/insert.ts';
import { listenerName } from '../src/postgres/listen.ts';
import { transitionBatchSql } from '../src/postgres/transition-batch-sql.ts';
import { DB_NOW_MS, tablesOf } from '../src/postgres/sql-text.ts';
import { transitionEntry } from '../src/log-entries.ts';
import type { NewTask, StepWrite, TransitionWrite } from '../src/store.ts';
import { PG_URL, hasPostgres, withPg } from './support/postgres.ts';
import { PROBE_NOW, explain, probeId, probeStep, type PlanNode } from './support/plans.ts';
import { schemasOfThisFile } from './support/engine.ts';
import { claimOf } from './support/claims.ts';

const freshSchema = schemasOfThisFile('sw_joins');

const BATCH = 200;
/** Parents of the batch's children in the case of children's ends (two children each). */
const PARENTS = BATCH / 2;
const NOW = PROBE_NOW;

/**
 * The nodes of a plan, each with the rows it handled: those it returned, and those its filter or
 * join filter removed, over all its loops (a node run once per row of the batch, over the batch,
 * handles its square).
 */
function handled(node: PlanNode, acc: Array<{ node: string; rows: number }> = []): Array<{ node: string; rows: number }> {
  const rows = (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Join Filter'] ?? 0)) * node['Actual Loops'];
  acc.push({ node: [node['Node Type'], node['Relation Name'] ?? node['CTE Name'] ?? '', node['Join Filter'] ?? node.Filter ?? ''].join(' ').trim(), rows });
  for (const child of node.Plans ?? []) handled(child, acc);
  return acc;
}

/** The loops of every node of `node`'s plan that scans the set-returning function `fn`. */
function loopsOf(node: PlanNode & { 'Function Name'?: string }, fn: string, acc: number[] = []): number[] {
  if (node['Function Name'] === fn) acc.push(node['Actual Loops']);
  for (const child of node.Plans ?? []) loopsOf(child, fn, acc);
  return acc;
}

const id = probeId;
const step = probeStep;

describe.skipIf(!(await hasPostgres()))('PostgreSQL batched statements', () => {
  it(`compare rows in proportion to a batch of ${BATCH} tasks, not to its square`, async () => {
    const schema = freshSchema();
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}` });
    await engine.ready();
    await engine.close();
    const t = tablesOf(schema);
    await withPg(async (c) => {
      // Tasks 1…PARENTS are parents (waiting for their children); the next BATCH run under
      // worker-a at epoch 1; the BATCH after them are due.
      await c.query(
        `INSERT INTO ${t.tasks} (id, workflow, workflow_version, status, epoch, lease_owner, lease_expires_at, run_at, created_at, updated_at, wait_events)
         SELECT 'task-' || lpad(g::text, 6, '0'), 'wf', '1', CASE WHEN g > $1 + $3 THEN 'pending' WHEN g > $3 THEN 'running' ELSE 'waiting' END,
           CASE WHEN g > $1 + $3 THEN 0 ELSE 1 END, CASE WHEN g > $3 AND g <= $1 + $3 THEN 'worker-a' END,
           CASE WHEN g > $3 AND g <= $1 + $3 THEN ${DB_NOW_MS} + 60000 END, $2, 1, 1,
           CASE WHEN g <= $3 THEN '|child:task-' || lpad((g + $3)::text, 6, '0') || '|' END
         FROM generate_series(1, 2 * $1 + $3) g`,
        [BATCH, NOW, PARENTS],
      );
      await c.query(`INSERT INTO ${t.heads} (id, status, epoch, lease_owner, event_seq) SELECT id, status, epoch, lease_owner, 1 FROM ${t.tasks}`);
      await c.query(`ANALYZE ${t.tasks}; ANALYZE ${t.heads}`);
      await c.query('SET plan_cache_mode = force_generic_plan');

      const running = Array.from({ length: BATCH }, (_, k) => id(k + PARENTS + 1));
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
      // Ends that each announce their own news (a cancel's is not grouped), with a listener connected.
      const announcing = ends.map((w) => ({ ...w, notify: { reason: 'cancel' as const, taskId: w.taskId } }));
      const childEnds = ends.map((w, k) => ({ ...w, parentSignal: { taskId: id(1 + (k % PARENTS)), name: `child:${w.taskId}` } }));
      const claim = claimUncappedSql(t, claimOf('worker-b', NOW, BATCH));
      // A capped claim's statement that takes the candidates its transaction picked (the due tasks).
      const due = Array.from({ length: BATCH }, (_, k) => ({ id: id(PARENTS + BATCH + k + 1), status: 'pending' as const, leaseOwner: null, event: 'claim' as const }));
      const capped = cappedTakeSql(t, claimOf('worker-b', NOW, BATCH), due);
      // The running tasks' leases taken as expired (expiredForMs below zero moves the cutoff past their expiry).
      const expiry = expireLeasesSql(t, { now: NOW, event: 'abort', from: ['running'], to: 'cancelled', set: { clearLease: true, finishedAt: NOW }, expiredForMs: -120_000, note: 'probe' });
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
        { name: 'batched end-of-run transitions that each notify a listener', ...transitionBatchSql(t, announcing, () => 'probe_channel'), rows: BATCH, notifies: true },
        { name: "batched ends of children, with their parents' signals", ...transitionBatchSql(t, childEnds, () => 'probe_channel'), rows: BATCH },
        { name: 'a claim of a batch of due tasks', text: claim!.text, values: claim!.values, rows: BATCH },
        { name: 'a capped claim taking a batch of picked tasks', ...capped, rows: BATCH },
        // One row: the count of the tasks it took; its update of the tasks takes all of them.
        { name: 'a lease expiry of a batch of tasks', ...expiry, rows: 1, updated: BATCH },
        { name: 'a batch of starts', text: insertSql(ctx, false), values: insertValues(ctx, starts, undefined), rows: BATCH },
      ];
      // A connection that listens on the probe's channel, as an engine's listener names itself.
      const listener = new pg.Client({ connectionString: PG_URL, application_name: listenerName('probe_channel') });
      await listener.connect();
      try {
        for (const k of cases) {
          const plan = await explain(c, k.text, k.values);
          // Whether a listener is connected is read from pg_stat_activity once per statement, not
          // once per task (each read copies the status of every backend).
          if ('notifies' in k) expect(Math.max(...loopsOf(plan, 'pg_stat_get_activity')), `${k.name}: reads of pg_stat_activity`).toBe(1);
          expect(plan['Actual Rows'], k.name).toBe(k.rows);
          const nodes = handled(plan);
          if ('updated' in k) expect(nodes.find((n) => n.node.startsWith('ModifyTable tasks'))?.rows, `${k.name}: tasks updated`).toBe(k.updated);
          const worst = nodes.reduce((a, b) => (b.rows > a.rows ? b : a));
          // A hash join, a sort or an index lookup per row handles about one row per row of the
          // batch (a child's end also its parent's, a start its idempotency check): a few times the
          // batch, against 40,000 for a loop over the batch per row.
          expect(worst.rows, `${k.name}: ${worst.node} handled ${worst.rows} rows`).toBeLessThanOrEqual(4 * BATCH);
        }
      } finally {
        await listener.end();
      }
    });
  });
});
