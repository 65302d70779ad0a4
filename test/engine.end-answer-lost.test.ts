// The last write of a run (its end) can commit and still fail for the worker: the connection drops
// around the commit and the answer is lost. The write is sent again, and its guard refuses it (the
// task is no longer running under that epoch). The run must see that its own end is what the row
// shows, and finish as planned instead of reporting its lease lost.
import { describe, expect, it } from 'vitest';
import { Engine, StoreUnavailableError, openStore, workflow, type Store, type TaskStatus } from '../src/index.ts';
import { FAST, aroundEachWrite, tempDbUrl } from './support/engine.ts';

/** `inner`, whose first write that ends a task commits and then fails as a lost answer does. */
function losingFirstEnd(inner: Store): { store: Store; lost: () => number } {
  let lost = 0;
  const store = aroundEachWrite(inner, async (ops, write) => {
    const results = await write(ops);
    if (lost === 0 && ops.some((op) => op.kind === 'transition' && op.to === 'succeeded')) {
      lost++;
      throw new StoreUnavailableError('The database is unavailable: Connection terminated unexpectedly');
    }
    return results;
  });
  return { store, lost: () => lost };
}

describe('the end of a run whose answer was lost', () => {
  it('finishes the run as planned (no lease lost) and the caller gets the result', async () => {
    const wf = workflow('end-answer-lost', async (ctx) => {
      const a = await ctx.step('a', () => 1);
      const b = await ctx.step('b', () => 2);
      return a + b;
    });
    const { store, lost } = losingFirstEnd(await openStore(tempDbUrl()));
    const engine = new Engine({ store, workflows: [wf] });
    try {
      const worker = engine.worker(FAST);
      const finished: Array<TaskStatus | 'lease-lost'> = [];
      const leaseLost: string[] = [];
      const retried: string[] = [];
      worker.on('run:finished', (e) => finished.push(e.status));
      worker.on('lease:lost', (e) => leaseLost.push(e.taskId));
      worker.on('worker:error', (e) => retried.push(e.during));
      await worker.start();
      const { id } = await engine.start(wf);
      expect(await engine.result(id, { timeout: '20s' })).toBe(3);
      await expect.poll(() => finished.length, { timeout: 10_000 }).toBe(1);
      expect(lost()).toBe(1);
      expect(retried.some((d) => d.startsWith('writing checkpoints'))).toBe(true);
      expect(finished).toEqual(['succeeded']);
      expect(leaseLost).toEqual([]);
      expect((await engine.get(id)).status).toBe('succeeded');
    } finally {
      await engine.close();
    }
  });
});
