// Counts and times the statements a 300-step task sends to PostgreSQL (run from a checkout root).
import pg from 'pg';
const { Engine, workflow } = await import(process.cwd() + '/dist/index.js');
const counts = new Map();
const orig = pg.Client.prototype.query;
let on = false;
let inQuery = 0;
pg.Client.prototype.query = function (q, ...rest) {
  if (on) {
    const text = typeof q === 'string' ? q : q.text;
    const k = text.replace(/\s+/g, ' ').slice(0, 90);
    counts.set(k, (counts.get(k) ?? 0) + 1);
    const t0 = performance.now();
    const r = orig.call(this, q, ...rest);
    if (r && r.then) return r.then((v) => { inQuery += performance.now() - t0; return v; });
    return r;
  }
  return orig.call(this, q, ...rest);
};
const N = 300;
const wf = workflow('many', async (ctx) => { for (let i = 0; i < N; i++) await ctx.step('s', () => i); return 1; });
const schema = `prof_${process.pid}`;
const engine = new Engine({ store: `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`, workflows: [wf] });
const w = engine.worker({ concurrency: 4 });
await w.start();
{ const { id } = await engine.start(wf); await engine.result(id); }
on = true;
const t = performance.now();
const { id } = await engine.start(wf); await engine.result(id);
const ms = performance.now() - t;
on = false;
await w.stop(); await engine.close();
const c = new pg.Client('postgres://postgres@127.0.0.1:5432/test'); await c.connect(); await c.query(`DROP SCHEMA "${schema}" CASCADE`); await c.end();
console.log(`${(ms * 1000 / N).toFixed(0)} µs/step, in queries ${(inQuery * 1000 / N).toFixed(0)} µs/step`);
for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(String(v).padStart(6), (v / N).toFixed(2), k);
