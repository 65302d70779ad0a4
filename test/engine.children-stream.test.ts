// A cancel of a parent reaches its child's model stream: the child's HTTP connection to the model
// is closed, the child ends cancelled, and the parent ends cancelled after it.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TaskCancelledError, workflow } from '../src/index.ts';
import { chatCompletion, streamEvents } from '../src/ai/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
let client: OpenAI;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  client = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL });
});
afterEach(async () => {
  await fake.close();
});

describe('child tasks: cancel reaches a model stream', () => {
  it("cancelling the parent closes its child's model stream mid-reply; both end cancelled, the child first", async () => {
    fake.script([{ kind: 'text', chunks: ['The ', 'answer ', 'is ', 'long'], stallAfter: 2 }]);
    const writer = workflow('stream-writer', async (ctx) => {
      const r = await chatCompletion(ctx, 'write', client, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
      return r.choices[0]?.message.content;
    });
    const planner = workflow('stream-planner', async (ctx) => ctx.child(writer, undefined));
    const engine = makeEngine({ workflows: [planner, writer] });
    await startWorker(engine, { concurrency: 4 });
    const { id } = await engine.start(planner);
    const req = await fake.waitForRequest(1, 2);
    await waitForStatus(engine, id, 'waiting');
    const childId = (await engine.get(id)).children[0]?.id as string;
    // Cancel once the child's stream has delivered both chunks.
    let seen = '';
    for await (const f of streamEvents(engine, childId, { pollMs: 10 })) if ((seen += f.delta) === 'The answer ') break;
    await engine.cancel(id, { reason: 'enough' });
    await req.ended;
    expect(req.closedByClient).toBe(true);
    expect(await engine.result(id).catch((e: unknown) => e)).toBeInstanceOf(TaskCancelledError);
    const child = await engine.get(childId);
    expect(child.status).toBe('cancelled');
    expect(child.cancelReason).toBe(`its parent task ${id} was cancelled: enough`);
    expect(child.finishedAt as number).toBeLessThanOrEqual((await engine.get(id)).finishedAt as number);
  });
});
