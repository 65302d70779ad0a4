// StepwiseChatTransport driven as useChat drives it, in Node against a real listening server and
// worker: the UI message chunks of an answer (text parts, usage as message metadata, finish), one
// task per session, reconnectToStream only while an answer is pending, and what it refuses.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { UIMessage, UIMessageChunk } from 'ai';
import OpenAI from 'openai';
import { workflow } from '../src/index.ts';
import { chatCompletion, chatMessages, replyStep, type ChatInput, type ChatMessage } from '../src/ai/index.ts';
import { StepwiseChatTransport, StepwiseClient } from '../src/client/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { TOKENS, tokenOf } from './support/server.ts';

let fake: FakeOpenAI;
let openai: OpenAI;
const closers: Array<() => Promise<void>> = [];
beforeEach(async () => {
  fake = await startFakeOpenAI();
  openai = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL, maxRetries: 0 });
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  await fake.close();
});

const chat = workflow('transport-chat', async (ctx, input: ChatInput) => {
  const transcript: ChatMessage[] = [...(input.history ?? [])];
  for await (const m of chatMessages(ctx)) {
    transcript.push(m);
    const r = await chatCompletion(ctx, replyStep(m.id), openai, {
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      messages: transcript.map((t) => ({ role: t.role, content: t.text })),
    });
    transcript.push({ id: `${m.id}:reply`, role: 'assistant', text: r.choices[0]?.message.content ?? '' });
  }
});

async function setup() {
  const engine = makeEngine({ workflows: [chat] });
  await startWorker(engine);
  const listening = await createServer(engine, { tokens: TOKENS }).listen({ port: 0, hostname: '127.0.0.1' });
  closers.push(() => listening.close());
  // The requests the transport makes, as "METHOD path".
  const requests: string[] = [];
  const counting: typeof fetch = (input, init) => {
    requests.push(`${init?.method ?? 'GET'} ${decodeURIComponent(new URL(String(input)).pathname)}`);
    return fetch(input, init);
  };
  const client = new StepwiseClient({ baseUrl: listening.url, token: tokenOf('oscar'), fetch: counting });
  const transport = new StepwiseChatTransport<UIMessage>({ client, workflow: 'transport-chat' });
  return { engine, transport, requests };
}

const user = (id: string, text: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const send = (t: StepwiseChatTransport<UIMessage>, chatId: string, messages: UIMessage[]) =>
  t.sendMessages({ trigger: 'submit-message', chatId, messageId: undefined, messages, abortSignal: undefined });

async function all(stream: ReadableStream<UIMessageChunk>): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

describe('StepwiseChatTransport', () => {
  it('turns an answer into UI message chunks with usage as metadata, and keeps one task for the session', async () => {
    fake.script([
      { kind: 'text', chunks: ['Hello ', 'there.'], usage: { prompt_tokens: 7, completion_tokens: 2 } },
      { kind: 'text', chunks: ['Again.'], usage: { prompt_tokens: 12, completion_tokens: 1 } },
    ]);
    const { engine, transport, requests } = await setup();
    const first = await all(await send(transport, 'c1', [user('m1', 'hi')]));
    expect(first.map((c) => c.type)).toEqual(['start', 'text-start', 'text-delta', 'text-delta', 'message-metadata', 'text-end', 'finish']);
    expect(
      first
        .filter((c) => c.type === 'text-delta')
        .map((c) => (c as { delta: string }).delta)
        .join(''),
    ).toBe('Hello there.');
    expect(first.find((c) => c.type === 'message-metadata')).toMatchObject({ messageMetadata: { usage: { inputTokens: 7, outputTokens: 2 } } });
    // Nothing pending: nothing to resume.
    expect(await transport.reconnectToStream({ chatId: 'c1' })).toBeNull();
    const second = await all(await send(transport, 'c1', [user('m1', 'hi'), { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'Hello there.' }] }, user('m2', 'and?')]));
    expect(second.filter((c) => c.type === 'text-delta').map((c) => (c as { delta: string }).delta)).toEqual(['Again.']);
    // One session: the model saw the whole conversation, and one task answered both.
    expect(fake.requests[1]?.body.messages).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello there.' },
      { role: 'user', content: 'and?' },
    ]);
    expect((await engine.list({ workflow: 'transport-chat' })).tasks).toHaveLength(1);
    // A message to a live session is one signal and one stream read: the session's task (which
    // grows with the conversation) is never read whole.
    const [task] = (await engine.list({ workflow: 'transport-chat' })).tasks;
    expect(requests.filter((r) => r === `GET /api/tasks/${task?.id}`)).toEqual([]);
    expect(requests.filter((r) => r.startsWith('POST ') && r.endsWith('/signals/chat:message'))).toHaveLength(2);
  });

  it('goes on in a new session, started with the history, once the session has ended', async () => {
    fake.script([
      { kind: 'text', chunks: ['One.'] },
      { kind: 'text', chunks: ['Two.'] },
    ]);
    const { engine, transport } = await setup();
    await all(await send(transport, 'c2', [user('m1', 'first')]));
    const [task] = (await engine.list({ workflow: 'transport-chat' })).tasks;
    await engine.cancel(task?.id as string);
    const again = await all(await send(transport, 'c2', [user('m1', 'first'), { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'One.' }] }, user('m2', 'second')]));
    expect(again.at(-1)).toEqual({ type: 'finish' });
    const tasks = (await engine.list({ workflow: 'transport-chat' })).tasks;
    expect(tasks).toHaveLength(2);
    const fresh = tasks.find((t) => t.id !== task?.id);
    expect((await engine.get(fresh?.id as string)).input).toEqual({
      chatId: 'c2',
      history: [
        { id: 'm1', role: 'user', text: 'first' },
        { id: 'a1', role: 'assistant', text: 'One.' },
      ],
    });
  });

  it('refuses to regenerate and a last message that is not the user’s', async () => {
    const { transport } = await setup();
    await expect(transport.sendMessages({ trigger: 'regenerate-message', chatId: 'c3', messageId: 'x', messages: [user('m1', 'hi')], abortSignal: undefined })).rejects.toThrow(
      /regenerating/,
    );
    await expect(send(transport, 'c3', [{ id: 'a', role: 'assistant', parts: [] }])).rejects.toThrow(/the user/);
  });
});
