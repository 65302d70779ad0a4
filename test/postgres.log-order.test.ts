// engine.events() across tasks on PostgreSQL. The store reads the log of every task in (xid, id)
// order, which is not a task's seq order when a transaction that took its xid early appends to a
// task after a younger transaction did (it waited for the task row, or wrote elsewhere first).
// The reader still hands out each task's entries once and in seq order, from every cursor.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow, type Store } from '../src/index.ts';
import type { LogPage } from '../src/store.ts';
import { signalReceivedEntry } from '../src/log-entries.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { schemasOfThisFile } from './support/engine.ts';

const available = await hasPostgres();
if (!available && process.env.CI === 'true') throw new Error(`PostgreSQL is required in CI (${PG_URL})`);
if (!available) console.warn(`PostgreSQL not reachable at ${PG_URL}: postgres.log-order tests skipped`);
const schema = schemasOfThisFile('sw_logorder');

const waits = workflow('waits-for-go', async (ctx) => ctx.waitForEvent('go'));

type Seen = { task: string; seq: number; type: string; cursor: string };

/**
 * The store's log from the start, once every entry committed before the call is readable: other
 * test files' transactions in flight on the same server may hold the log back a while.
 */
async function storedLog(store: Store): Promise<LogPage['events']> {
  const mark = await store.logMark();
  for (;;) {
    const page = await store.readLog(null, 1000, mark);
    if (!page.behind) return page.events;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** 'pending' if `p` has not settled within `ms`. */
async function stateAfter(p: Promise<unknown>, ms: number): Promise<'settled' | 'pending'> {
  return Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms)),
  ]);
}

async function readAll(engine: Engine, after?: string): Promise<Seen[]> {
  const seen: Seen[] = [];
  for await (const e of engine.events({ follow: false, ...(after === undefined ? {} : { after }) })) {
    seen.push({ task: e.taskId, seq: e.seq, type: e.type, cursor: e.cursor ?? '' });
  }
  return seen;
}

describe.skipIf(!available)("the log of every task, where PostgreSQL's order is not the tasks' (PostgreSQL)", () => {
  it("hands out each task's entries once and in seq order, and resumes from every cursor without loss or repeat", async () => {
    const s = schema();
    const store: Store = await openStore(`${PG_URL}?schema=${s}`);
    const engine = new Engine({ store, workflows: [waits] });
    const early = new pg.Client({ connectionString: PG_URL });
    await early.connect();
    try {
      const { id } = await engine.start(waits);
      const { id: other } = await engine.start(waits);
      // A transaction takes its xid, then a younger one appends to the task and commits first.
      await early.query('BEGIN');
      await early.query('SELECT pg_current_xact_id()');
      await engine.signal(id, 'ping', { n: 1 }, { by: 'younger' });
      await engine.signal(other, 'ping', { n: 1 }, { by: 'younger' });
      // The older transaction appends to the task as the store does: counter, then entry.
      const entry = signalReceivedEntry('user', 'older', { signalId: 0, name: 'ping', payload: '{"n":2}', idempotencyKey: null });
      await early.query(
        `WITH f AS (UPDATE "${s}".task_heads SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq)
         INSERT INTO "${s}".events (task_id, seq, at, type, actor_kind, actor_id, data) SELECT $1, f.event_seq, $2, $3, $4, $5, $6 FROM f`,
        [id, Date.now(), entry.type, entry.actorKind, entry.actorId, entry.data],
      );
      await early.query('COMMIT');
      await engine.signal(id, 'ping', { n: 3 }, { by: 'later' });

      // The store's order puts the older transaction's seq 3 before the younger one's seq 2.
      const stored = (await storedLog(store)).filter((e) => e.taskId === id).map((e) => e.seq);
      expect(stored).toEqual([1, 3, 2, 4]);

      const all = await readAll(engine);
      expect(all.filter((e) => e.task === id).map((e) => `${e.seq} ${e.type}`)).toEqual(['1 transition', '2 signal:received', '3 signal:received', '4 signal:received']);
      expect(all.filter((e) => e.task === other).map((e) => e.seq)).toEqual([1, 2]);
      expect(all).toHaveLength(6);
      // Resuming after any entry gives exactly the entries after it.
      for (let i = 0; i < all.length; i++) {
        const rest = await readAll(engine, all[i]?.cursor);
        expect(
          rest.map((e) => `${e.task}/${e.seq}`),
          `after entry ${i}`,
        ).toEqual(all.slice(i + 1).map((e) => `${e.task}/${e.seq}`));
      }
      // A cursor that holds entries delivered early is kept whole and checked.
      expect(all.some((e) => e.cursor.split('|').length === 3)).toBe(true);
      await expect(readAll(engine, `${all[0]?.cursor ?? ''}|0|${id}:x`)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(readAll(engine, `${all[0]?.cursor ?? ''}|0|`)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(readAll(engine, `${all[0]?.cursor ?? ''}|0`)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await early.end();
      await engine.close();
      await store.close();
    }
  });

  it('a reader that ends at the end of the log (follow: false) waits for the entries committed before it that an older transaction holds back, then hands them out', async () => {
    const s = schema();
    const store: Store = await openStore(`${PG_URL}?schema=${s}`);
    const engine = new Engine({ store, workflows: [waits] });
    const older = new pg.Client({ connectionString: PG_URL });
    await older.connect();
    try {
      const { id } = await engine.start(waits);
      // A transaction elsewhere on the server takes its xid and stays open: entries of younger
      // transactions cannot be placed in the log's order until it ends.
      await older.query('BEGIN');
      await older.query('SELECT pg_current_xact_id()');
      await engine.signal(id, 'ping', { n: 1 }, { by: 'ada' });

      const mark = await store.logMark();
      const page = await store.readLog(null, 100, mark);
      expect(page.behind).toBe(true);
      expect(page.events.filter((e) => e.taskId === id && e.type === 'signal:received')).toEqual([]);

      const reading = readAll(engine);
      expect(await stateAfter(reading, 300)).toBe('pending');
      await older.query('COMMIT');
      expect((await reading).filter((e) => e.task === id).map((e) => `${e.seq} ${e.type}`)).toEqual(['1 transition', '2 signal:received']);
      expect((await store.readLog(null, 100, mark)).behind).toBe(false);
    } finally {
      await older.end();
      await engine.close();
      await store.close();
    }
  });
});
