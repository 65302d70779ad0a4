// A worker's slot is free once a run's code is over and only its last write is left: the next
// due task is claimed while that write commits, instead of after it. The user code of two runs
// still never overlaps at concurrency 1, and the first task ends as it would have.
import { describe, expect, it } from 'vitest';
import { openStore, workflow } from '../src/index.ts';
import { beforeEachWrite, gate, makeEngine, startWorker, tempDbUrl } from './support/engine.ts';

describe('the slot of a run whose last write is in flight', () => {
  it('goes to the next due task at concurrency 1 while that write is held, and code of two runs never overlaps', async () => {
    let inCode = 0;
    let most = 0;
    const ran: string[] = [];
    const wf = workflow('slot-at-end', async (ctx, input: { n: number }) => {
      await ctx.step('work', async () => {
        inCode++;
        most = Math.max(most, inCode);
        ran.push(`run ${input.n}`);
        await new Promise((r) => setTimeout(r, 5));
        inCode--;
      });
      return input.n;
    });
    const url = tempDbUrl();
    const inner = await openStore(url);
    const secondRan = gate();
    let held = false;
    // The first task's final write (`complete`) waits until the second task's step has run.
    const store = beforeEachWrite(inner, async (ops) => {
      if (!held && ops.some((o) => o.kind === 'transition' && o.event === 'complete')) {
        held = true;
        ran.push('first end held');
        await secondRan.promise;
        ran.push('first end released');
      }
    });
    const engine = makeEngine({ store, workflows: [wf] });
    try {
      await startWorker(engine, { concurrency: 1 });
      const first = await engine.start(wf, { n: 1 });
      const second = await engine.start(wf, { n: 2 });
      const watcher = (async () => {
        while (!ran.includes('run 2')) await new Promise((r) => setTimeout(r, 10));
        secondRan.open();
      })();
      // Without the slot freed at the end, the second task could not be claimed while the first's end is held: neither would finish.
      expect(await engine.result(first.id, { timeout: '20s' })).toBe(1);
      expect(await engine.result(second.id, { timeout: '20s' })).toBe(2);
      await watcher;
      expect(ran.slice(0, 4)).toEqual(['run 1', 'first end held', 'run 2', 'first end released']);
      expect(most).toBe(1);
      expect((await engine.get(first.id))?.status).toBe('succeeded');
    } finally {
      await engine.close();
      await inner.close();
    }
  });
});
