import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('ctx.forEach', () => {
  it('checkpoints a 10,000-item loop per chunk: 100 journal rows, a compact journal, results in order', async () => {
    const wf = workflow('batch', async (ctx) => {
      const ids = await ctx.step('list', () => Array.from({ length: 10_000 }, (_, i) => i));
      const out = await ctx.forEach('score', ids, async (id) => id % 7, { chunkSize: 100, concurrency: 8 });
      return { count: out.length, sum: out.reduce((a, b) => a + b, 0), first: out.slice(0, 8) };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    const result = await engine.result(id);
    let sum = 0;
    for (let i = 0; i < 10_000; i++) sum += i % 7;
    expect(result).toEqual({ count: 10_000, sum, first: [0, 1, 2, 3, 4, 5, 6, 0] });
    const info = await engine.get(id);
    const chunks = info.steps.filter((s) => s.name.startsWith('score:'));
    expect(chunks).toHaveLength(100);
    expect(chunks[0]?.name).toBe('score:0-99');
    expect(chunks[99]?.name).toBe('score:9900-9999');
    // The journal of the loop: each chunk's row is its name and its results' JSON.
    const bytes = chunks.reduce((n, s) => n + Buffer.byteLength(s.name) + Buffer.byteLength(JSON.stringify(s.output)), 0);
    console.log(`[forEach] 10,000 items in chunks of 100: ${chunks.length} journal rows, ${bytes} bytes of names and outputs (${(bytes / 10_000).toFixed(1)} bytes per item)`);
    expect(bytes).toBeLessThan(10_000 * 3); // one digit and a comma per result, plus 100 short names
  });

  it('a worker stopped in the middle of a chunk loses only that chunk: the next run resumes after the last completed one', async () => {
    const calls = new Map<number, number>();
    let blockAt: number | null = 250;
    const wf = workflow('resumable', async (ctx) =>
      ctx.forEach(
        'docs',
        Array.from({ length: 500 }, (_, i) => i),
        (i, _index, { signal }) => {
          calls.set(i, (calls.get(i) ?? 0) + 1);
          if (i !== blockAt) return i * 2;
          return new Promise<number>((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
        },
        { chunkSize: 100 },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    const first = await startWorker(engine, { shutdownGraceMs: 50 });
    const { id } = await engine.start(wf);
    await eventually(() => calls.has(250), 10_000, 'item 250 to start');
    await first.stop();
    await waitForStatus(engine, id, 'pending');
    expect((await engine.get(id)).steps.map((s) => s.name)).toEqual(['docs:0-99', 'docs:100-199']);
    blockAt = null;
    await startWorker(engine);
    const out = (await engine.result(id)) as number[];
    expect(out).toHaveLength(500);
    expect(out[499]).toBe(998);
    const twice = [...calls].filter(([, n]) => n > 1).map(([i]) => i);
    // Only the chunk in progress (200-299) ran again, from its start up to the item it stopped at.
    expect(twice).toEqual(Array.from({ length: 51 }, (_, k) => 200 + k));
  });

  it('refuses bad arguments with a typed error', async () => {
    const wf = workflow('bad-loop', async (ctx) => ctx.forEach('x', [1, 2], (n) => n, { chunkSize: 0 }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/chunkSize must be an integer ≥ 1/) });
  });
});
