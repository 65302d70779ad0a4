// On PostgreSQL a checkpoint fences and numbers its log entries on the task's head (task_heads), a
// narrow copy of the task row's status, epoch and lease owner, with the log counter. Every write of
// those columns must copy them in the same statement, and every append must count on the head:
// after work that takes each path (claims, reclaims, lease expiry, checkpoints alone and batched,
// ends alone and batched, children's ends with their parents' signals, signals, cancels, retries,
// approvals' and debounced starts' entries), every head matches its task and its counter its log.
import { describe, expect, it } from 'vitest';
import { ChildFailedError, Engine, workflow } from '../src/index.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import { migratePostgres } from '../src/postgres/migrate.ts';
import { postgresMigrations } from '../src/generated/sql.ts';
import { planCreation } from '../src/transitions.ts';
import { claimOf } from './support/claims.ts';
import { PG_URL, hasPostgres, withPg } from './support/postgres.ts';
import { FAST, eventually, schemasOfThisFile, waitForStatus } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_heads');

/** Tasks whose head differs from the task row, or whose log counter differs from the log's length or last seq. */
async function headsOutOfStep(schema: string): Promise<unknown[]> {
  const s = `"${schema}"`;
  return withPg(
    async (c) =>
      (
        await c.query(`
      WITH logs AS (
        SELECT task_id, count(*)::int AS n, max(seq) AS last FROM (
          SELECT task_id, seq FROM ${s}.events UNION ALL SELECT task_id, log_seq FROM ${s}.steps WHERE log_seq IS NOT NULL) x
        GROUP BY task_id)
      SELECT t.id, t.status, t.epoch, t.lease_owner, h.status AS h_status, h.epoch AS h_epoch, h.lease_owner AS h_owner, h.event_seq, l.n, l.last
      FROM ${s}.tasks t FULL JOIN ${s}.task_heads h ON h.id = t.id LEFT JOIN logs l ON l.task_id = coalesce(t.id, h.id)
      WHERE t.id IS NULL OR h.id IS NULL
        OR (t.status, t.epoch, t.lease_owner) IS DISTINCT FROM (h.status, h.epoch, h.lease_owner)
        OR h.event_seq <> coalesce(l.n, 0) OR h.event_seq <> coalesce(l.last, 0)`)
      ).rows,
  );
}

describe.skipIf(!(await hasPostgres()))('task heads on PostgreSQL', () => {
  it('match their tasks and count their logs after work that takes every path that writes them', async () => {
    const schema = freshSchema();
    let flaky = 0;
    const leaf = workflow('heads-leaf', async (ctx, n: number) => {
      if (n % 7 === 3) await ctx.step('fail', () => Promise.reject(new Error(`leaf ${n} fails`)));
      return ctx.step('square', () => n * n);
    });
    const parent = workflow('heads-parent', async (ctx) => {
      const settled = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => ctx.child(leaf, i, { name: `leaf-${i}` })));
      const failed = settled.filter((r) => r.status === 'rejected' && r.reason instanceof ChildFailedError).length;
      const batch = await ctx.children(leaf, [1, 2, 4, 5], { concurrency: 2 });
      return { failed, batch: batch.length };
    });
    const waiter = workflow('heads-waiter', async (ctx) => {
      await ctx.step('before', () => 1);
      const got = await ctx.waitForEvent('go');
      await ctx.sleep('pause', 20);
      return ctx.step('after', () => (got.timedOut ? null : got.payload));
    });
    const retried = workflow('heads-retried', async (ctx) =>
      ctx.step(
        'flaky',
        () => {
          if (++flaky < 3) throw new Error('not yet');
          return 'ok';
        },
        { retry: { maxAttempts: 5, initialDelay: 1, jitter: false } },
      ),
    );
    const approved = workflow('heads-approved', async (ctx) => ctx.approval('ship', { timeout: '1h' }));
    const debounced = workflow('heads-debounced', async (ctx, input: { v: number }) => ctx.step('v', () => input.v));
    const engine = new Engine({ store: `${PG_URL}?schema=${schema}`, workflows: [leaf, parent, waiter, retried, approved, debounced] });
    const workers = [engine.worker({ ...FAST, concurrency: 8 }), engine.worker({ ...FAST, concurrency: 8 })];
    try {
      await engine.ready();
      // Debounced starts rewrite an unclaimed task (with a log entry) before any worker runs.
      const d1 = await engine.start(debounced, { v: 1 }, { debounce: { key: 'k', period: '50ms' } });
      await engine.start(debounced, { v: 2 }, { debounce: { key: 'k', period: '50ms' } });
      for (const w of workers) await w.start();
      const p = await engine.start(parent);
      const w1 = await engine.start(waiter);
      const w2 = await engine.start(waiter);
      const r = await engine.start(retried);
      const a = await engine.start(approved);
      await waitForStatus(engine, w1.id, 'waiting');
      await waitForStatus(engine, w2.id, 'waiting');
      await engine.signal(w1.id, 'go', 'yes');
      await engine.cancel(w2.id, { reason: 'not needed' });
      await eventually(async () => (await engine.approvals({ taskId: a.id })).length === 1);
      const [approval] = await engine.approvals({ taskId: a.id });
      await engine.decide(approval!.id, { approve: true, by: 'ops' });
      expect(await p.result({ timeout: '30s' })).toEqual({ failed: 3, batch: 4 });
      expect(await w1.result({ timeout: '10s' })).toBe('yes');
      expect(await r.result({ timeout: '10s' })).toBe('ok');
      expect(await d1.result({ timeout: '10s' })).toBe(2);
      await a.result({ timeout: '10s' });
      await waitForStatus(engine, w2.id, 'cancelled');
    } finally {
      for (const w of workers) await w.stop();
      await engine.close();
    }
    expect(await headsOutOfStep(schema)).toEqual([]);

    // A lease that runs out: reclaimed by a claim, and ended by the expiry sweep.
    const store = new PostgresStore(PG_URL, { schema });
    try {
      const now = Date.now();
      for (const id of ['lapse-a', 'lapse-b']) {
        await store.insertTask({
          id,
          workflow: 'wf',
          workflowVersion: '1',
          input: null,
          idempotencyKey: null,
          runAt: now,
          createdAt: now,
          ...planCreation({ kind: 'user', id: 'anonymous' }),
        });
      }
      expect(await store.claim({ ...claimOf('w-old', now), leaseMs: 1 })).toHaveLength(2);
      await new Promise((done) => setTimeout(done, 20));
      expect(await store.expireLeases({ now, event: 'release', from: ['running'], to: 'pending', set: { clearLease: true, runAt: now }, expiredForMs: 0 })).toBe(2);
      expect(await headsOutOfStep(schema)).toEqual([]); // the expiry's own copy, before a claim overwrites it
      const reclaimed = await store.claim({ ...claimOf('w-new', now), leaseMs: 1 });
      expect(reclaimed.map((x) => x.task.epoch).sort()).toEqual([2, 2]);
      await new Promise((done) => setTimeout(done, 20));
      expect((await store.claim(claimOf('w-third', now))).map((x) => x.event)).toEqual(['reclaim', 'reclaim']);
    } finally {
      await store.close();
    }
    expect(await headsOutOfStep(schema)).toEqual([]);
  }, 60_000);

  it('upgrades a schema written under migration 25: each task gets its head, and its next entries follow its log', async () => {
    const schema = freshSchema();
    await withPg(async (c) => {
      await migratePostgres(c, schema, 1_000, postgresMigrations.slice(0, 25));
      const s = `"${schema}"`;
      await c.query(`INSERT INTO ${s}.tasks (id, workflow, workflow_version, status, created_at, updated_at, run_at, runs, epoch, lease_owner, event_seq, wait_events)
        VALUES ('old-waiting', 'wf', '1', 'waiting', 1000, 1000, NULL, 1, 3, NULL, 2, '|go|'), ('old-running', 'wf', '1', 'running', 1000, 1000, NULL, 1, 1, 'w-1', 1, NULL)`);
      await c.query(`INSERT INTO ${s}.events (task_id, seq, at, type, actor_kind, actor_id, data) VALUES
        ('old-waiting', 1, 1000, 'transition', 'user', 'anonymous', '{"event":"create","to":"pending"}'),
        ('old-waiting', 2, 1001, 'transition', 'worker', 'w-1', '{"event":"park","from":"running","to":"waiting"}'),
        ('old-running', 1, 1000, 'transition', 'user', 'anonymous', '{"event":"create","to":"pending"}')`);
    });
    const store = new PostgresStore(PG_URL, { schema });
    try {
      await store.migrate();
      const heads = await withPg(async (c) => (await c.query(`SELECT id, status, epoch, lease_owner, event_seq FROM "${schema}".task_heads ORDER BY id`)).rows);
      expect(heads).toEqual([
        { id: 'old-running', status: 'running', epoch: 1, lease_owner: 'w-1', event_seq: 1 },
        { id: 'old-waiting', status: 'waiting', epoch: 3, lease_owner: null, event_seq: 2 },
      ]);
      const column = await withPg(
        async (c) => (await c.query(`SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'tasks' AND column_name = 'event_seq'`, [schema])).rows,
      );
      expect(column).toEqual([]);
      await store.insertSignal({ taskId: 'old-waiting', name: 'go', payload: null, idempotencyKey: null, at: 2000, actorKind: 'user', actorId: 'ops' });
      expect((await store.getEvents('old-waiting')).map((e) => [e.seq, e.type])).toEqual([
        [1, 'transition'],
        [2, 'transition'],
        [3, 'signal:received'],
      ]);
    } finally {
      await store.close();
    }
    expect(await headsOutOfStep(schema)).toEqual([]);
  });
});
