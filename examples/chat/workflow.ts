/**
 * The chat example's workflow: a chat session as one durable task. It waits (parked, no worker
 * slot held) for the person's next message, answers it in a streaming model step named
 * `reply:<message id>` (the page follows its tokens), and ends after ten idle minutes. A worker
 * killed mid-answer is replaced and the answer starts over from a reset frame; a page reloaded
 * mid-answer replays it; Stop cancels the task and closes the model's stream.
 *
 * The model: with OPENAI_API_KEY set, a real one (STEPWISE_CHAT_MODEL, default gpt-4o-mini);
 * otherwise the offline stand-in at STEPWISE_CHAT_BASE_URL (server.ts starts it).
 */
import OpenAI from 'openai';
import { workflow } from '../../src/index.ts';
import { chatCompletion, chatMessages, replyStep, type ChatInput, type ChatMessage } from '../../src/ai/index.ts';

function model(): { client: OpenAI; name: string } {
  if (process.env.OPENAI_API_KEY) return { client: new OpenAI({ maxRetries: 0 }), name: process.env.STEPWISE_CHAT_MODEL ?? 'gpt-4o-mini' };
  const baseURL = process.env.STEPWISE_CHAT_BASE_URL;
  if (!baseURL) throw new Error('chat: set OPENAI_API_KEY for a real model, or STEPWISE_CHAT_BASE_URL for the offline one (npm run example:chat starts it).');
  return { client: new OpenAI({ apiKey: 'offline', baseURL, maxRetries: 0 }), name: 'offline-chat' };
}

export const chat = workflow(
  'chat',
  async (ctx, input: ChatInput) => {
    const { client, name } = model();
    const transcript: ChatMessage[] = [...(input.history ?? [])];
    for await (const message of chatMessages(ctx, { idle: process.env.STEPWISE_CHAT_IDLE ?? '10m' })) {
      transcript.push(message);
      const reply = await chatCompletion(ctx, replyStep(message.id), client, {
        model: name,
        stream: true,
        messages: [{ role: 'system', content: 'You are a helpful assistant.' }, ...transcript.map((m) => ({ role: m.role, content: m.text }))],
      });
      transcript.push({ id: `${message.id}:reply`, role: 'assistant', text: reply.choices[0]?.message.content ?? '' });
    }
    return { messages: transcript.length };
  },
  { retry: { maxAttempts: 3 } },
);

export const workflows = [chat];
