// A transaction takes its place among the results the code receives (`done`) inside its commit.
// A result of a parallel branch that completes after that, while the commit's answer is on its
// way, comes after it: the code receives the two in that order in the first run, as a replay
// hands them back, so the calls each branch makes next keep their positions.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { openStore } from '../src/store-url.ts';
import type { Store } from '../src/store.ts';
import { checkReplay } from '../src/testing/index.ts';
import { makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

describe('a transaction beside a step', () => {
  it('hands the code its result before a result recorded after its commit, and the task replays', async () => {
    const store: Store = await openStore(tempDbUrl());
    let checkpointed!: () => void;
    const afterCheckpoint = new Promise<void>((resolve) => (checkpointed = resolve));
    // The commit's answer comes late: the parallel step completes after the transaction took its
    // place. The delay only lets the old order show (the step handed over first); the order asserted
    // below follows from the `done`s, however long the step takes on a busy machine.
    const run = store.runInTransaction?.bind(store);
    if (!run) throw new Error('the store runs no transactions');
    store.runInTransaction = (fn, checkpoint) =>
      run(fn, (value) => {
        const cp = checkpoint(value);
        checkpointed();
        return cp;
      }).then(async (r) => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return r;
      });
    const received: string[] = [];
    const wf = workflow('tx-beside-step', async (ctx) => {
      await Promise.all([
        ctx
          .transaction('t', async () => 't')
          .then(async (v) => {
            received.push(v);
            await ctx.step('after-t', () => 1);
          }),
        ctx
          .step('b', async () => {
            await afterCheckpoint;
            return 'b';
          })
          .then(async (v) => {
            received.push(v);
            await ctx.step('after-b', () => 2);
          }),
      ]);
      return 'done';
    });
    const engine = makeEngine({ workflows: [wf], store });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, ['succeeded', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('succeeded');
    expect(received).toEqual(['t', 'b']);
    expect(info.steps.map((s) => s.name)).toEqual(['t', 'b', 'after-t', 'after-b']);
    await expect(checkReplay(engine, id)).resolves.toBeDefined();
    await engine.close();
    await store.close();
  });
});
