// On PostgreSQL a child's end wakes its parent's worker through NOTIFY, not by polling: the
// parent's and the child's workers belong to two engines (as two machines would), and both poll
// only once a minute. A parent woken by polling alone would not finish within the test's bound (45 s).
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { FAST, schemasOfThisFile } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';

const available = await hasPostgres();
if (!available) console.warn(`PostgreSQL not reachable at ${PG_URL}: the NOTIFY test of child tasks is skipped`);
const schema = schemasOfThisFile('sw_child_notify');

const leaf = workflow('notify-leaf', async (ctx, input: { n: number }) => ctx.step('double', () => input.n * 2));
const parent = workflow('notify-parent', async (ctx) => {
  const a = await ctx.child(leaf, { n: 1 });
  const b = await ctx.child(leaf, { n: 2 }); // started after the first child's end woke the parent
  return a + b;
});

describe.skipIf(!available)('child tasks on PostgreSQL: wake-ups', () => {
  it("a child's end wakes its parent on another engine's worker through NOTIFY", async () => {
    const url = `${PG_URL}?schema=${schema()}`;
    const parents = new Engine({ store: url, workflows: [parent] });
    const children = new Engine({ store: url, workflows: [leaf] });
    const slow = { ...FAST, pollIntervalMs: 60_000 };
    try {
      const pw = parents.worker(slow);
      const cw = children.worker(slow);
      await pw.start();
      await cw.start();
      const { id } = await parents.start(parent);
      expect(await parents.result(id, { timeout: '45s' })).toBe(6);
      await pw.stop();
      await cw.stop();
    } finally {
      await parents.close();
      await children.close();
    }
  }, 90_000);
});
