import { it, expect } from 'vitest';
import { workflow } from '../src/index.ts';
import { makeEngine, startWorker, tempDbUrl } from './support/engine.ts';
import { openStore } from '../src/store-url.ts';

const msg = (i: number) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} `.repeat(90) });
const chat = workflow('chat', async (ctx, input: { turns: number }) => {
  let transcript: Array<{ role: string; content: string }> = [];
  for (let t = 0; t < input.turns; t++) {
    transcript = await ctx.step(`turn`, () => [...transcript, msg(2 * t), msg(2 * t + 1)]);
  }
  return transcript;
});

it('smoke', async () => {
  const url = tempDbUrl();
  const engine = makeEngine({ store: url, workflows: [chat] });
  await startWorker(engine);
  for (const turns of [10, 20, 40]) {
    const h = await engine.start(chat, { turns });
    const out = await engine.result(h.id, { timeout: 60_000 });
    expect(out).toHaveLength(turns * 2);
    expect(out[5]).toEqual(msg(5));
    const s = await openStore(url, {});
    console.log(turns, await s.blobUsage());
    await s.close();
  }
  const info = await engine.get((await engine.list({})).tasks[0]!.id);
  console.log(typeof info.output, JSON.stringify(info.output).length);
  const ev = [];
  for await (const e of engine.events({ taskId: info.id, follow: false } as any)) ev.push(e);
  console.log(ev.length, JSON.stringify(ev.at(-2)).slice(0, 200));
}, 120_000);
