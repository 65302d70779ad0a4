/**
 * The offline stand-in model of the chat example (the research agent's OpenAI-compatible server
 * with a chatty policy): it answers the last message a few words at a time, slowly enough to
 * reload the page, kill the worker or press Stop in the middle of an answer.
 */
import { startOfflineModel, type Message, type OfflineModel } from '../research-agent/offline-model.ts';

export function offlineAnswer(messages: Message[]): string {
  const asked = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  const turn = messages.filter((m) => m.role === 'user').length;
  return (
    `You said: "${asked}". This is answer ${turn} of a durable chat: every answer is a checkpointed step, ` +
    'so a worker that dies mid-sentence is replaced and the answer starts over, and a page that reloads picks the stream up where it was.'
  );
}

export function startOfflineChat(paceMs = Number(process.env.STEPWISE_CHAT_PACE_MS ?? 60)): Promise<OfflineModel> {
  return startOfflineModel({ paceMs, policy: (messages) => ({ answer: offlineAnswer(messages) }) });
}
