// The stores' deletion records (the durable report of a deletion, see src/retention/purge.ts), on
// SQLite and PostgreSQL: written in the deletion's transaction, claimed once they are due (each
// claim holds them for its lease), and removed once reported.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow } from '../src/index.ts';
import { FAST, schemasOfThisFile, tempDir } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';

const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_deletion_records');
const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'records.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];

const done = workflow('records-done', async (ctx) => ctx.step('work', () => 'ok'));

/** Runs `n` tasks to their end on `url`; returns their ids. */
async function finishedTasks(url: string, n: number): Promise<string[]> {
  const engine = new Engine({ store: url, workflows: [done] });
  try {
    await engine.worker(FAST).start();
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const t = await engine.start(done);
      expect(await t.result()).toBe('ok');
      ids.push(t.id);
    }
    return ids.sort();
  } finally {
    await engine.close();
  }
}

describe.each(stores)('deletion records ($name)', ({ url: makeUrl }) => {
  it('are written with the deletion, claimed once due (one claim at a time), and removed once acknowledged', async () => {
    const url = makeUrl();
    const ids = await finishedTasks(url, 3);
    const store = await openStore(url);
    try {
      const by = { kind: 'user' as const, id: 'ops' };
      const gone = await store.deleteTasks({ ids: ids.slice(0, 2), statuses: ['succeeded'] }, 10, { reason: 'purge', by, at: 1000, deliverAfter: 5000 });
      expect(gone.map((t) => t.id)).toEqual(ids.slice(0, 2));
      // Without a note, no record.
      expect(await store.deleteTasks({ ids: [ids[2] as string], statuses: ['succeeded'] }, 10)).toHaveLength(1);
      expect(await store.claimDeletions?.(4999, 100, 10)).toEqual([]);
      const claimed = (await store.claimDeletions?.(5000, 100, 10)) ?? [];
      expect(claimed.map((r) => r.id).sort()).toEqual(ids.slice(0, 2));
      expect(claimed[0]).toMatchObject({ workflow: 'records-done', status: 'succeeded', reason: 'purge', by, at: 1000 });
      // Claimed until 5100: nobody else takes them meanwhile; after that, they are due again.
      expect(await store.claimDeletions?.(5099, 100, 10)).toEqual([]);
      expect(await store.claimDeletions?.(5100, 100, 1)).toHaveLength(1);
      await store.ackDeletions?.(ids.slice(0, 2));
      expect(await store.claimDeletions?.(1e12, 100, 10)).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
