// Server cost of the two checkpoint fences, interleaved on one table: the counter UPDATE (now) vs a FOR SHARE lock (base).
import pg from 'pg';
const { Engine } = await import(process.cwd() + '/dist/index.js');
const schema = `fence_${process.pid}`;
const url = `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`;
const engine = new Engine({ store: url }); await engine.ready(); await engine.close();
const c = new pg.Client('postgres://postgres@127.0.0.1:5432/test'); await c.connect();
const T = `"${schema}"`;
await c.query(`INSERT INTO ${T}.tasks (id, workflow, workflow_version, status, epoch, created_at, updated_at, lease_owner, lease_expires_at, input) VALUES ('t1','w','1','running',1,0,0,'w1', 9e15, repeat('x', 200))`);
const cols = 'task_id, seq, name, kind, status, output, error, attempts, started_at, finished_at, wake_at, epoch, done';
const vals = '$1::text, $2::integer, $3::text, $4::text, $5::text, $6::text, $7::text, $8::integer, $9::bigint, $10::bigint, $11::bigint, $12::integer, $13::integer';
const set = 'name = excluded.name, kind = excluded.kind, status = excluded.status, output = excluded.output, error = excluded.error, attempts = excluded.attempts, started_at = excluded.started_at, finished_at = excluded.finished_at, wake_at = excluded.wake_at, epoch = excluded.epoch, done = excluded.done';
const A = `WITH f AS (UPDATE ${T}.tasks SET event_seq = event_seq + 1 WHERE id = $14::text AND epoch = $15::integer AND (status IN ('running','cancelling')) IS TRUE RETURNING event_seq, lease_owner)
  INSERT INTO ${T}.steps (${cols}, log_seq) SELECT ${vals}, f.event_seq FROM f ON CONFLICT (task_id, seq) DO UPDATE SET ${set}, log_seq = excluded.log_seq`;
const B = `INSERT INTO ${T}.steps (${cols}) SELECT ${vals} WHERE EXISTS (SELECT 1 FROM (SELECT id, status, epoch FROM ${T}.tasks WHERE id = $14::text OFFSET 0 FOR SHARE) f WHERE f.epoch = $15::integer AND f.status IN ('running','cancelling'))
  ON CONFLICT (task_id, seq) DO UPDATE SET ${set}`;
let seq = 0;
const run = async (name, text) => {
  const s = seq++;
  await c.query({ name, text, values: ['t1', s, 's', 'step', 'completed', String(s), null, 1, 1, 2, null, 1, s, 't1', 1] });
};
for (let i = 0; i < 500; i++) { await run('a', A); await run('b', B); }
const tA = [], tB = [];
for (let r = 0; r < 20; r++) {
  for (const [name, text, out] of (r % 2 ? [['a', A, tA], ['b', B, tB]] : [['b', B, tB], ['a', A, tA]])) {
    const t = performance.now();
    for (let i = 0; i < 200; i++) await run(name, text);
    out.push((performance.now() - t) * 1000 / 200);
  }
}
const med = (x) => x.sort((a, b) => a - b)[x.length >> 1];
console.log(`counter UPDATE fence ${med(tA).toFixed(0)} µs, FOR SHARE fence ${med(tB).toFixed(0)} µs, ratio ${(med(tA) / med(tB)).toFixed(2)}`);
await c.query(`DROP SCHEMA ${T} CASCADE`); await c.end();
