// The drain's floor on PostgreSQL: the same burst as (b) run by hand-written SQL workers
// (bench/floor-worker.mjs), measured the same way: warm-up of twice the burst per process and
// WARM_UP_BURSTS bursts per process not measured, then bursts of tasks all due at one moment,
// first claim → last finish from the tasks' own times.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { WARM_UP_BURSTS, cpuBetween, cpuSample, root, stopWorkers, workerNodeFlags } from './lib.ts';
import { PG_URL } from './postgres.ts';
import type { Throughput } from './sqlite.ts';

/**
 * The floor's tables: what the guarantees need and no more. Tasks with the claim's due index
 * (pending by run_at) and the lease index that finds expired leases; journal rows by position;
 * log entries by (task, seq) and in commit order (xid, id), as a reader of the log needs them.
 */
function schemaSql(s: string): string {
  return `DROP SCHEMA IF EXISTS ${s} CASCADE; CREATE SCHEMA ${s};
    CREATE TABLE ${s}.tasks (id TEXT COLLATE "C" PRIMARY KEY, status TEXT NOT NULL, input TEXT, output TEXT, run_at BIGINT NOT NULL,
      epoch INTEGER NOT NULL DEFAULT 0, lease_owner TEXT, lease_expires_at BIGINT, event_seq INTEGER NOT NULL DEFAULT 0,
      created_at BIGINT NOT NULL, claimed_at BIGINT, finished_at BIGINT) WITH (fillfactor = 80);
    CREATE INDEX tasks_due ON ${s}.tasks (run_at, id) WHERE status = 'pending';
    CREATE INDEX tasks_leased ON ${s}.tasks (lease_expires_at) WHERE status = 'running';
    CREATE TABLE ${s}.steps (task_id TEXT COLLATE "C" NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
      output TEXT, attempts INTEGER NOT NULL, finished_at BIGINT, epoch INTEGER NOT NULL, log_seq INTEGER, PRIMARY KEY (task_id, seq));
    CREATE TABLE ${s}.events (task_id TEXT COLLATE "C" NOT NULL, seq INTEGER NOT NULL, at BIGINT NOT NULL, type TEXT NOT NULL,
      actor_id TEXT NOT NULL, data TEXT, xid xid8 NOT NULL DEFAULT pg_current_xact_id(), id BIGINT GENERATED ALWAYS AS IDENTITY,
      PRIMARY KEY (task_id, seq));
    CREATE INDEX events_log ON ${s}.events (xid, id);`;
}

/** Inserts `n` pending tasks due at `dueAt`, each with its creation log entry. */
async function insertTasks(c: pg.Client, s: string, n: number, dueAt: number, prefix: string): Promise<void> {
  await c.query(
    `WITH t AS (INSERT INTO ${s}.tasks (id, status, input, run_at, event_seq, created_at)
       SELECT $1 || lpad(g::text, 8, '0'), 'pending', 'null', $2, 1, $3 FROM generate_series(1, $4) g RETURNING id)
     INSERT INTO ${s}.events (task_id, seq, at, type, actor_id, data) SELECT id, 1, $3, 'transition', 'user', '{"event":"create"}' FROM t`,
    [prefix, dueAt, Date.now(), n],
  );
}

async function waitDone(c: pg.Client, s: string, prefix: string): Promise<{ spanMs: number }> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const { rows } = await c.query(
      `SELECT count(*) FILTER (WHERE status <> 'succeeded')::int AS left, min(claimed_at) AS first, max(finished_at) AS last FROM ${s}.tasks WHERE id LIKE $1 || '%'`,
      [prefix],
    );
    const r = rows[0] as { left: number; first: string; last: string };
    if (r.left === 0) return { spanMs: Number(r.last) - Number(r.first) };
    if (Date.now() > deadline) throw new Error('floor: tasks did not finish within 10 minutes');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** `tasks` × 3 no-op steps drained by `workers` floor worker processes claiming up to `batch` each. */
export async function floorThroughput(workers: number, tasks: number, batch = 256, bursts = 3): Promise<Throughput> {
  const schema = `stepwise_bench_floor_${process.pid}`;
  const s = `"${schema}"`;
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  let children: ChildProcess[] = [];
  try {
    await c.query(schemaSql(s));
    children = Array.from({ length: workers }, (_, i) =>
      spawn(process.execPath, [...workerNodeFlags(), join(root, 'bench/floor-worker.mjs'), PG_URL, schema, String(batch), `floor-${i}`], { stdio: ['ignore', 'ignore', 'inherit'] }),
    );
    await insertTasks(c, s, 2 * tasks * workers, Date.now(), 'warm-');
    await waitDone(c, s, 'warm-');
    await c.query(`ANALYZE ${s}.tasks, ${s}.steps, ${s}.events`);
    const runs: Throughput[] = [];
    // The first WARM_UP_BURSTS bursts per process are not measured, as in Stepwise's drain (bench/sqlite.ts).
    for (let b = -WARM_UP_BURSTS * workers; b < bursts; b++) {
      const prefix = `b${b}-`;
      const dueAt = Date.now() + 300;
      await insertTasks(c, s, tasks, dueAt, prefix);
      while (Date.now() < dueAt - 20) await new Promise((r) => setTimeout(r, 5));
      // The CPU window as in (b): from just before the burst falls due to its last finish.
      const pids = children.map((ch) => ch.pid ?? 0);
      const before = cpuSample(pids);
      const { spanMs } = await waitDone(c, s, prefix);
      const after = cpuSample(pids);
      const seconds = spanMs / 1000;
      const cpu = cpuBetween(before, after);
      if (b >= 0) runs.push({ store: 'floor', workers, tasks, steps: tasks * 3, seconds, tasksPerSec: tasks / seconds, stepsPerSec: (tasks * 3) / seconds, ...(cpu ? { cpu } : {}) });
    }
    return [...runs].sort((x, y) => x.stepsPerSec - y.stepsPerSec)[Math.floor(runs.length / 2)] as Throughput;
  } finally {
    await stopWorkers(children);
    await c.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
    await c.end();
  }
}
