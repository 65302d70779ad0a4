// A run's last write asks for the task's head alone when nothing in the worker's process listens
// for finished tasks (a worker process of its own), and for the task's end (its head and outcome,
// not its input) when something does (the engine that started the task and waits for its result),
// which then answers without reading the task. The result reads the same either way.
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow, type Store } from '../src/index.ts';
import type { WriteOp } from '../src/store.ts';
import { gate, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

const wf = workflow('end-answer', async (ctx, input: { n: number }) => (await ctx.step('double', () => input.n * 2)) + 1);

/** `inner`, with the `answer` of every transition written through `writeBatch` recorded, and reads of tasks counted. */
function recording(inner: Store): { store: Store; answers: Array<string | undefined>; reads: { n: number } } {
  const answers: Array<string | undefined> = [];
  const reads = { n: 0 };
  const store = new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      // SQLite writes a lone op at once (`writeBatchNow`) and a batch through `writeBatch`.
      if (prop === 'writeBatch' || (prop === 'writeBatchNow' && inner.writeBatchNow)) {
        const write = (value as (ops: readonly WriteOp[]) => unknown).bind(target);
        return (ops: readonly WriteOp[]) => {
          for (const op of ops) if (op.kind === 'transition') answers.push(op.answer);
          return write(ops);
        };
      }
      if (prop === 'getTask' || prop === 'getTasks') {
        const read = (value as (...a: unknown[]) => unknown).bind(target);
        return (...a: unknown[]) => {
          reads.n++;
          return read(...a);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store, answers, reads };
}

describe('the answer a run’s last write asks for', () => {
  it('is the head alone in a process where nothing listens for finished tasks; the result is read whole elsewhere', async () => {
    const url = tempDbUrl();
    const { store, answers } = recording(await openStore(url));
    const workerSide = new Engine({ store, workflows: [wf] });
    const client = new Engine({ store: url, workflows: [wf] });
    try {
      await startWorker(workerSide);
      const handles = await client.startMany([1, 2, 3].map((n) => ({ workflow: wf, input: { n } })));
      expect(await Promise.all(handles.map((h) => client.result(h.id, { timeout: '20s' })))).toEqual([3, 5, 7]);
      expect(answers.length).toBeGreaterThanOrEqual(3);
      expect(answers.every((a) => a === 'head')).toBe(true);
      expect(await client.get(handles[0]!.id)).toMatchObject({ status: 'succeeded', output: 3 });
    } finally {
      await workerSide.close();
      await client.close();
    }
  });

  it('is the task’s end in a process whose result() waits for the task when its run ends, which answers without reading it', async () => {
    const open = gate();
    const gated = workflow('end-answer-gated', async (ctx) =>
      ctx.step('wait', async () => {
        await open.promise;
        return 'done';
      }),
    );
    const { store, answers, reads } = recording(await openStore(tempDbUrl()));
    const engine = new Engine({ store, workflows: [wf, gated] });
    try {
      await startWorker(engine);
      // A first result() opens the engine's subscription to finished tasks; from then on the
      // engine follows the ends of the tasks it starts, and a later result() listens at once.
      expect(await engine.result((await engine.start(wf, { n: 1 })).id, { timeout: '20s' })).toBe(3);
      const { id } = await engine.start(gated, {});
      const result = engine.result(id, { timeout: '20s' });
      await waitForStatus(engine, id, 'running');
      await new Promise((r) => setImmediate(r));
      const before = answers.length;
      const readsBefore = reads.n;
      open.open();
      expect(await result).toBe('done');
      expect(answers.length).toBeGreaterThan(before);
      expect(answers.slice(before).every((a) => a === 'end')).toBe(true);
      expect(reads.n).toBe(readsBefore);
    } finally {
      await engine.close();
    }
  });
});
