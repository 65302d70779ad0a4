// `npm run bench`, (c2) a parent's cancel reaching its child's model stream (issue 30): a parent
// awaits a child whose step streams a chat completion with the real `openai` client from a local
// fake OpenAI server (test/support/fake-openai.ts) that sends two chunks and then stalls. Once both
// chunks are sent, the parent is cancelled. Timed from the call of `engine.cancel(parent)` to the
// fake server seeing the child's connection closed (the cancel travels parent → child → the
// child's step signal → the HTTP request's abort), p50 / p99; a worker in the same process.
import OpenAI from 'openai';
import { join } from 'node:path';
import { Engine, workflow } from '../dist/index.js';
import { chatCompletion } from '../dist/ai/index.js';
import { startFakeOpenAI } from '../test/support/fake-openai.ts';
import { fmt, median, percentile, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

export interface StreamClose {
  store: string;
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

async function measure(url: string, label: string, samples: number): Promise<StreamClose> {
  const fake = await startFakeOpenAI([{ kind: 'text', chunks: ['The ', 'answer ', 'is ', 'long'], stallAfter: 2 }]);
  const client = new OpenAI({ apiKey: 'bench-key', baseURL: fake.baseURL, maxRetries: 0 });
  const writer = workflow('bench-stream-writer', async (ctx) => {
    const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
    return r.choices[0]?.message.content;
  });
  const planner = workflow('bench-stream-planner', async (ctx) => ctx.child(writer, undefined));
  const engine = new Engine({ store: url, workflows: [planner, writer] });
  const worker = engine.worker({ concurrency: 8, pollIntervalMs: 50 });
  await worker.start();
  const times: number[] = [];
  try {
    for (let i = 1; i <= samples; i++) {
      const { id } = await engine.start(planner);
      const req = await fake.waitForRequest(i, 2);
      const t0 = performance.now();
      await engine.cancel(id, { reason: 'bench' });
      await req.ended;
      times.push(performance.now() - t0);
      if (!req.closedByClient) throw new Error(`bench (c2): the stream of sample ${i} ended without the client closing it`);
      await engine.result(id, { timeout: '30s' }).then(
        () => {
          throw new Error(`bench (c2): parent ${id} succeeded after its cancel`);
        },
        () => undefined,
      );
    }
  } finally {
    await worker.stop();
    await engine.close();
    await fake.close();
  }
  return { store: label, samples, p50Ms: median(times), p99Ms: percentile(times, 99), maxMs: Math.max(...times) };
}

export async function report(ctx: SectionCtx): Promise<void> {
  const samples = ctx.quick ? 20 : 100;
  ctx.line(`\n(c2) A parent's cancel reaching its child's model stream: engine.cancel(parent) to the child's HTTP stream closed`);
  ctx.line(`    (seen by the fake model server), in-process worker, ${samples} samples.`);
  const figures: StreamClose[] = [await measure(`sqlite:${join(tempDir(), 'stream-close.db')}`, 'SQLite', samples)];
  if (ctx.pgUp) figures.push(await measure(postgres.freshPgUrl('streamclose'), 'PostgreSQL', samples));
  for (const f of figures) ctx.line(`    ${f.store.padEnd(10)} p50 ${fmt(f.p50Ms, 1)} ms   p99 ${fmt(f.p99Ms, 1)} ms   max ${fmt(f.maxMs, 1)} ms`);
  ctx.results.streamClose = figures;
}
