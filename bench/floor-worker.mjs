// The drain's floor: a worker written by hand in SQL that does the least the same guarantees need,
// with the same batching as Stepwise's workers. Per batch of up to `batch` due tasks:
//   1. claim with FOR UPDATE SKIP LOCKED: status running, epoch + 1, a lease, the claim's log entry;
//   2. step a, then step b: one multi-row statement each for the whole batch, every row fenced by
//      its task's epoch and status (the fence's UPDATE takes the row's next log seq, which the
//      journal row carries, as Stepwise's result rows do); a step's row is durable before the next
//      step runs, as Stepwise's are before the next side effect;
//   3. the last step's row with the final transition (status succeeded, output, lease cleared, the
//      transition's log entry), one multi-row statement, fenced the same way.
// Every statement commits on its own (autocommit), as Stepwise's group commit does; the log's seq
// is gapless per task and commit-ordered (events carry the writing transaction's xid). A lease
// lasts 30 s and this worker never renews one: a burst ends long before it would need to. (A
// Stepwise worker's heartbeat beats every 2 s whatever it runs, so about one burst in sixteen
// includes a renewal of all its leases: see docs/benchmarks.md.)
// Usage: node bench/floor-worker.mjs <postgres url> <schema> <batch> <worker id>
// Runs until SIGTERM; polls every 5 ms while nothing is due.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

const [url, schema, batchArg, workerId] = process.argv.slice(2);
const batch = Number(batchArg);
const s = `"${schema}"`;
const LEASE_MS = 30_000;
const client = new pg.Client({ connectionString: url });
await client.connect();
let stopping = false;
process.on('SIGTERM', () => (stopping = true));

// Expired leases first (their runs are taken over: epoch + 1 fences the old one off), then due
// pending tasks; each with its claim's log entry.
const claimSql = `WITH expired AS (
    SELECT id, true AS reclaim FROM ${s}.tasks WHERE status = 'running' AND lease_expires_at <= $1
    ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
  ), pending AS (
    SELECT id, false AS reclaim FROM ${s}.tasks WHERE status = 'pending' AND run_at <= $1
    ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
  ), due AS (
    (SELECT * FROM expired) UNION ALL (SELECT * FROM pending) LIMIT $2
  ), upd AS (
    UPDATE ${s}.tasks t SET status = 'running', epoch = t.epoch + 1, lease_owner = $3, lease_expires_at = $1 + ${LEASE_MS},
      event_seq = t.event_seq + 1, claimed_at = $1
    FROM due WHERE t.id = due.id RETURNING t.id, t.epoch, t.event_seq, due.reclaim
  ), log AS (
    INSERT INTO ${s}.events (task_id, seq, at, type, actor_id, data)
    SELECT id, event_seq, $1, 'transition', $3, CASE WHEN reclaim THEN '{"event":"reclaim"}' ELSE '{"event":"claim"}' END FROM upd
  ) SELECT id, epoch FROM upd`;

const stepSql = `WITH f AS (
    UPDATE ${s}.tasks t SET event_seq = t.event_seq + 1
    FROM unnest($1::text[], $2::integer[]) AS w(id, epoch)
    WHERE t.id = w.id AND t.epoch = w.epoch AND t.status = 'running'
    RETURNING t.id, t.epoch, t.event_seq
  ) INSERT INTO ${s}.steps (task_id, seq, name, status, output, attempts, finished_at, epoch, log_seq)
    SELECT f.id, $3, $4, 'completed', $5, 1, $6, f.epoch, f.event_seq FROM f`;

const finishSql = `WITH f AS (
    UPDATE ${s}.tasks t SET status = 'succeeded', output = $5, lease_owner = NULL, lease_expires_at = NULL,
      event_seq = t.event_seq + 2, finished_at = $6
    FROM unnest($1::text[], $2::integer[]) AS w(id, epoch)
    WHERE t.id = w.id AND t.epoch = w.epoch AND t.status = 'running'
    RETURNING t.id, t.epoch, t.event_seq
  ), j AS (
    INSERT INTO ${s}.steps (task_id, seq, name, status, output, attempts, finished_at, epoch, log_seq)
    SELECT f.id, $3, $4, 'completed', $5, 1, $6, f.epoch, f.event_seq - 1 FROM f
  ) INSERT INTO ${s}.events (task_id, seq, at, type, actor_id, data)
    SELECT f.id, f.event_seq, $6, 'transition', $7, '{"event":"complete"}' FROM f`;

while (!stopping) {
  const claimed = (await client.query({ name: 'claim', text: claimSql, values: [Date.now(), batch, workerId] })).rows;
  if (!claimed.length) {
    await sleep(5);
    continue;
  }
  const ids = claimed.map((r) => r.id);
  const epochs = claimed.map((r) => r.epoch);
  // The steps run (no-ops returning 1 and 2), then their rows are written for the whole batch.
  await client.query({ name: 'step', text: stepSql, values: [ids, epochs, 0, 'a', '1', Date.now()] });
  await client.query({ name: 'step', text: stepSql, values: [ids, epochs, 1, 'b', '2', Date.now()] });
  await client.query({ name: 'finish', text: finishSql, values: [ids, epochs, 2, 'c', '3', Date.now(), workerId] });
}
await client.end();
