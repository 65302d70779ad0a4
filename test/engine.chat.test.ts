// Chat sessions as durable tasks (chatMessages of stepwise-engine/ai): a task answers the messages
// sent to it in order, parked between them (no lease held), replays them identically after a
// crash-free park, ends after its idle time, and refuses a message that is not one.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { CHAT_MESSAGE_SIGNAL, chatMessages, replyStep, type ChatInput, type ChatMessage } from '../src/ai/index.ts';
import { TEST_STORE, eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const echo = workflow('echo-chat', async (ctx, input: ChatInput & { idle?: string }) => {
  const transcript: ChatMessage[] = [...(input.history ?? [])];
  for await (const m of chatMessages(ctx, { idle: input.idle ?? '10m' })) {
    transcript.push(m);
    const text = await ctx.step(replyStep(m.id), () => `echo ${m.text} (turn ${transcript.filter((t) => t.role === 'user').length})`);
    transcript.push({ id: `${m.id}:reply`, role: 'assistant', text });
  }
  return transcript.map((t) => `${t.role}: ${t.text}`);
});

describe('chat sessions (chatMessages)', () => {
  it(`runs this suite on the ${TEST_STORE} store`, async () => {
    expect((await makeEngine().ready()).dialect).toBe(TEST_STORE);
  });

  it('answers each message in its own reply step, parked between messages, and ends after the idle time', async () => {
    const engine = makeEngine({ workflows: [echo] });
    await startWorker(engine, { parkAfterMs: 0 });
    const { id } = await engine.start(echo, { history: [{ id: 'old', role: 'user', text: 'earlier' }], idle: '1500ms' });
    for (const [i, text] of ['hello', 'again'].entries()) {
      await waitForStatus(engine, id, 'waiting');
      expect((await engine.get(id)).lease).toBeNull();
      await engine.signal(id, CHAT_MESSAGE_SIGNAL, { id: `m${i}`, text }, { idempotencyKey: `chat-message:m${i}` });
      // A resent message counts once.
      await engine.signal(id, CHAT_MESSAGE_SIGNAL, { id: `m${i}`, text }, { idempotencyKey: `chat-message:m${i}` });
      const replies = async () => (await engine.get(id)).steps.filter((s) => s.name.startsWith('reply:') && s.status === 'completed').map((s) => s.name);
      await eventually(async () => (await replies()).length === i + 1, 10_000, `the reply to message ${i}`);
      expect(await replies()).toEqual(Array.from({ length: i + 1 }, (_, j) => replyStep(`m${j}`)));
    }
    expect(await engine.result(id, { timeout: '20s' })).toEqual(['user: earlier', 'user: hello', 'assistant: echo hello (turn 2)', 'user: again', 'assistant: echo again (turn 3)']);
  });

  it('fails the session with INVALID_ARGUMENT on a message that is not { id, text }', async () => {
    const engine = makeEngine({ workflows: [echo] });
    await startWorker(engine);
    const { id } = await engine.start(echo, {});
    await engine.signal(id, CHAT_MESSAGE_SIGNAL, { text: 'no id' });
    await waitForStatus(engine, id, 'failed');
    const info = await engine.get(id);
    expect(info.status === 'failed' && info.error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(info.status === 'failed' && info.error.message).toContain('"chat:message" signal carries { id, text }');
  });
});
