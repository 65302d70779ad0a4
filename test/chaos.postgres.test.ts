// Chaos: four worker processes on one PostgreSQL database, 300 tasks of four steps whose side
// effects go to a table of their own keyed by the step's idempotency key; for 30 seconds workers
// are killed with SIGKILL at random (and restarted), or frozen with SIGSTOP past their lease (and
// thawed, as zombies). Then: every task succeeded, every completed step ran exactly once, no side
// effect row was written twice, and no write from a fenced-off worker was accepted.
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Engine, rebuildTask } from '../src/index.ts';
import { chaos, createChaosTables } from './fixtures/chaos-workflows.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';
import { spawnCli, type SpawnedWorker } from './support/processes.ts';

const TASKS = 300;
const WORKERS = 4;
const CHAOS_MS = 30_000;
const LEASE_MS = 2000;

const schema = freshSchemaName('sw_chaos');
afterAll(async () => dropSchema(schema));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const between = (a: number, b: number): number => a + Math.floor(Math.random() * (b - a));

describe.skipIf(!(await hasPostgres()))('chaos on PostgreSQL', () => {
  it('survives 30 s of random SIGKILLs and SIGSTOPs across four workers without losing or repeating work', async () => {
    const db = `${PG_URL}?schema=${schema}`;
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    const engine = new Engine({ store: db, workflows: [chaos] });
    const outputs: SpawnedWorker[] = [];
    try {
      await engine.ready();
      await createChaosTables(client, schema);
      // An audit of every journal write, taken inside the writing transaction: the epoch the row
      // was written under, next to the task's epoch at that moment. A write accepted from a
      // fenced-off worker would show an older row epoch than the task's.
      await client.query(`CREATE TABLE "${schema}".chaos_audit (task_id TEXT, seq INT, row_epoch INT, task_epoch INT)`);
      await client.query(`CREATE FUNCTION "${schema}".chaos_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          INSERT INTO "${schema}".chaos_audit SELECT NEW.task_id, NEW.seq, NEW.epoch, t.epoch FROM "${schema}".tasks t WHERE t.id = NEW.task_id;
          RETURN NEW;
        END $$`);
      await client.query(`CREATE TRIGGER chaos_audit AFTER INSERT OR UPDATE ON "${schema}".steps FOR EACH ROW EXECUTE FUNCTION "${schema}".chaos_audit_fn()`);
      const ids: string[] = [];
      for (let n = 0; n < TASKS; n++) ids.push((await engine.start(chaos, { n, minMs: 150, maxMs: 650 })).id);

      const args = ['worker', 'test/fixtures/chaos-workflows.ts', '--db', db, '--lease-ms', String(LEASE_MS), '--heartbeat-ms', '400', '--poll-ms', '250', '--concurrency', '4'];
      const env = { CHAOS_PG_URL: PG_URL, CHAOS_SCHEMA: schema };
      const workerIds = new Map<SpawnedWorker, string>();
      const spawnOne = (): SpawnedWorker => {
        const id = `chaos-${outputs.length + 1}`;
        const w = spawnCli([...args, '--worker-id', id], env);
        workerIds.set(w, id);
        outputs.push(w);
        return w;
      };
      const slots = Array.from({ length: WORKERS }, spawnOne);
      const frozen = new Set<number>();
      const fencedOff: SpawnedWorker[] = [];
      let kills = 0;
      let stops = 0;
      const started = Date.now();
      while (Date.now() - started < CHAOS_MS) {
        await sleep(between(500, 1500));
        const i = between(0, WORKERS);
        if (frozen.has(i)) continue;
        const victim = slots[i] as SpawnedWorker;
        if (Math.random() < 0.7) {
          victim.child.kill('SIGKILL');
          await victim.exited;
          kills++;
          slots[i] = spawnOne();
        } else {
          // Frozen past its lease: its tasks are reclaimed elsewhere; when it thaws it is a zombie.
          // A worker frozen while it held no lease (still starting, or idle), or whose tasks no one
          // reclaimed before it thawed, has nothing to be fenced off from: only a zombie whose task
          // moved on while it was frozen must find its lease lost.
          const held = (
            await client.query<{ id: string; epoch: number }>(`SELECT id, epoch FROM "${schema}".tasks WHERE lease_owner = $1 AND status IN ('running', 'cancelling')`, [
              workerIds.get(victim),
            ])
          ).rows;
          victim.child.kill('SIGSTOP');
          stops++;
          frozen.add(i);
          setTimeout(
            () =>
              void (async () => {
                const moved = held.length
                  ? ((
                      await client.query<{ n: number }>(
                        `SELECT count(*)::int AS n FROM "${schema}".tasks t JOIN unnest($1::text[], $2::int[]) AS h(id, epoch) ON t.id = h.id WHERE t.epoch > h.epoch`,
                        [held.map((h) => h.id), held.map((h) => h.epoch)],
                      )
                    ).rows[0]?.n ?? 0)
                  : 0;
                victim.child.kill('SIGCONT');
                if (moved > 0) fencedOff.push(victim);
                // Left alone a while after it thaws, so that it meets its lost lease before any kill.
                setTimeout(() => frozen.delete(i), 2000);
              })(),
            between(LEASE_MS + 500, LEASE_MS + 1500),
          );
        }
      }
      const chaosSeconds = (Date.now() - started) / 1000;
      await sleep(LEASE_MS + 2000); // every frozen worker has thawed
      for (const [n, id] of ids.entries()) expect(await engine.result(id, { timeout: '3m' })).toBe(4 * n);

      // Each task's log, written by workers that were killed and frozen at random, alone rebuilds
      // its status, output and journal, with seqs 1, 2, 3… and no gap.
      for (const id of ids) {
        const info = await engine.get(id);
        const rebuilt = rebuildTask(info.history);
        expect(
          info.history.map((e) => e.seq),
          id,
        ).toEqual(info.history.map((_, i) => i + 1));
        expect(rebuilt.status, id).toBe('succeeded');
        expect(rebuilt.output, id).toEqual(info.status === 'succeeded' ? info.output : undefined);
        expect(
          rebuilt.steps.map((st) => [st.seq, st.name, st.status, st.epoch, st.output]),
          id,
        ).toEqual(info.steps.map((st) => [st.seq, st.name, st.status, st.epoch, st.output]));
      }

      // Every task succeeded with four completed steps.
      const tasks = await client.query<{ id: string; status: string; runs: number }>(`SELECT id, status, runs FROM "${schema}".tasks`);
      expect(tasks.rows).toHaveLength(TASKS);
      expect(tasks.rows.every((t) => t.status === 'succeeded')).toBe(true);
      const journal = await client.query<{ task_id: string; seq: number; name: string; status: string; epoch: number }>(
        `SELECT task_id, seq, name, status, epoch FROM "${schema}".steps ORDER BY task_id, seq`,
      );
      expect(journal.rows).toHaveLength(TASKS * 4);
      expect(journal.rows.every((s) => s.status === 'completed')).toBe(true);

      // No side-effect row was written twice: one row per step key, and exactly one execution
      // inserted it (others found the key taken).
      const effects = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".chaos_effects`);
      expect(effects.rows[0]?.n).toBe(TASKS * 4);
      const attempts = await client.query<{ key: string; epoch: number; inserted: boolean }>(`SELECT key, epoch, inserted FROM "${schema}".chaos_attempts`);
      const byKey = new Map<string, Array<{ epoch: number; inserted: boolean }>>();
      for (const a of attempts.rows) byKey.set(a.key, [...(byKey.get(a.key) ?? []), { epoch: a.epoch, inserted: a.inserted }]);
      expect(byKey.size).toBe(TASKS * 4);
      for (const list of byKey.values()) expect(list.filter((a) => a.inserted)).toHaveLength(1);

      // Every completed step ran exactly once from the run that checkpointed it on: executions at
      // or after the checkpointing epoch number exactly one (re-executions only by interrupted runs).
      let reExecuted = 0;
      for (const s of journal.rows) {
        const list = byKey.get(`v1:${s.task_id}:${s.name}#1`) ?? [];
        expect(
          list.filter((a) => a.epoch >= s.epoch),
          `${s.task_id} ${s.name}`,
        ).toEqual([{ epoch: s.epoch, inserted: expect.any(Boolean) }]);
        if (list.length > 1) reExecuted++;
      }

      // No write from a fenced-off worker was accepted: every journal write was made under the
      // task's current epoch (audited in the writing transaction), and epochs never go backwards
      // along a task's journal.
      const audit = await client.query<{ writes: number; stale: number }>(
        `SELECT count(*)::int AS writes, count(*) FILTER (WHERE row_epoch <> task_epoch)::int AS stale FROM "${schema}".chaos_audit`,
      );
      expect(audit.rows[0]?.writes).toBeGreaterThanOrEqual(TASKS * 4);
      expect(audit.rows[0]?.stale).toBe(0);
      let lastTask = '';
      let lastEpoch = 0;
      for (const s of journal.rows) {
        if (s.task_id !== lastTask) lastEpoch = 0;
        expect(s.epoch).toBeGreaterThanOrEqual(lastEpoch);
        lastTask = s.task_id;
        lastEpoch = s.epoch;
      }
      const claims = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".events WHERE type = 'transition' AND data::json->>'event' IN ('claim', 'reclaim')`);
      const resumptions = (claims.rows[0]?.n ?? 0) - TASKS;
      const refused = outputs.reduce((n, w) => n + (w.output().match(/lease lost/g)?.length ?? 0), 0);

      console.log(
        `[chaos] ${chaosSeconds.toFixed(1)} s of chaos: ${kills} SIGKILLs, ${stops} SIGSTOP/SIGCONT zombies ` +
          `(${fencedOff.length} thawed after a task of theirs was reclaimed), ${outputs.length} worker processes; ` +
          `${TASKS} tasks, ${TASKS * 4} steps, ${resumptions} resumptions (reclaims), ${reExecuted} steps re-executed by a later run ` +
          `(interrupted before their checkpoint, same idempotency key), ${refused} runs fenced off (writes refused after a lost lease), ` +
          `${audit.rows[0]?.writes} journal writes audited, ${audit.rows[0]?.stale} under a stale epoch.`,
      );
      expect(chaosSeconds).toBeGreaterThanOrEqual(30);
      expect(kills).toBeGreaterThan(0);
      expect(resumptions).toBeGreaterThan(0);
      // Each zombie whose task another worker took over while it was frozen had its writes refused.
      for (const w of fencedOff) expect(w.output(), workerIds.get(w)).toMatch(/lease lost/);
      for (const w of slots) w.child.kill('SIGTERM');
      await Promise.all(slots.map((w) => w.exited));
    } finally {
      for (const w of outputs) if (w.child.exitCode === null) w.child.kill('SIGKILL');
      await client.end();
      await engine.close();
    }
  }, 300_000);
});
