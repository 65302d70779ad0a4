// What a worker holds once its runs have ended: to keep V8's optimised code for the step path
// through an idle spell, it keeps the newest run's objects (run/warm-shapes.ts), and no more.
// Runs on the store the engine suites run on (SQLite, and PostgreSQL in the engine-on-postgres project).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker } from './support/engine.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe(`an idle worker's memory (${TEST_STORE})`, () => {
  it('holds the objects of the last run it worked on, and of no earlier run', async () => {
    // Each run's step returns a large object of its own; a weak reference tells whether anything still holds it.
    const outputs: Array<WeakRef<object>> = [];
    const wf = workflow('big-output', async (ctx, input: { i: number }) =>
      ctx.step('make', () => {
        const o = { i: input.i, text: 'x'.repeat(100_000) };
        outputs.push(new WeakRef(o));
        return o;
      }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    for (let i = 0; i < 4; i++) {
      const { id } = await engine.start(wf, { i });
      expect(await engine.result(id)).toMatchObject({ i });
    }
    // Weak references are cleared only by a collection in a later turn than the one that made them.
    await new Promise((r) => setTimeout(r, 0));
    gc();
    await new Promise((r) => setTimeout(r, 0));
    gc();
    expect(outputs.map((o) => o.deref() !== undefined)).toEqual([false, false, false, true]);
  });
});
