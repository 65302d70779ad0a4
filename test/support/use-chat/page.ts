// A chat page on the AI SDK's `useChat` (`@ai-sdk/react`) with `StepwiseChatTransport`, bundled
// for Chromium by test/client.use-chat.browser.test.ts. It keeps the conversation in
// sessionStorage as an app's persistence would (a message still streaming is left out: after a
// reload `resume: true` asks the transport for it again), one chat id per tab, and shows useChat's
// status on the body for the test to wait on.
import { createElement as h, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import type { UIMessage } from 'ai';
import { StepwiseChatTransport, StepwiseClient } from '../../../src/client/index.ts';

/** The browser globals the page uses (the project's TypeScript settings carry Node's types, not the DOM's). */
const page = globalThis as unknown as {
  stepwiseChat: { token: string };
  sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
  document: { body: { dataset: Record<string, string> }; getElementById(id: string): Element | null };
};
const { sessionStorage, document } = page;
const { token } = page.stepwiseChat;
const transport = new StepwiseChatTransport({ client: new StepwiseClient({ token }), workflow: 'chat' });
const chatId = sessionStorage.getItem('chat-id') ?? crypto.randomUUID();
sessionStorage.setItem('chat-id', chatId);
const saved = JSON.parse(sessionStorage.getItem('chat-messages') ?? '[]') as UIMessage[];

/** The text a message shows: its last text part (a retried attempt streams into a new one). */
function textOf(m: UIMessage): string {
  const texts = m.parts.filter((p) => p.type === 'text');
  return texts.at(-1)?.text ?? '';
}

function Chat(): ReturnType<typeof h> {
  const { messages, sendMessage, status, stop, error } = useChat({ id: chatId, messages: saved, transport, resume: true });
  const [text, setText] = useState('');
  useEffect(() => {
    const last = messages.at(-1);
    const settled = status === 'streaming' && last?.role === 'assistant' ? messages.slice(0, -1) : messages;
    sessionStorage.setItem('chat-messages', JSON.stringify(settled));
    document.body.dataset.status = status;
  }, [messages, status]);
  return h(
    'main',
    null,
    h(
      'ul',
      { id: 'log' },
      messages.map((m) => h('li', { key: m.id, className: m.role }, textOf(m))),
    ),
    error ? h('p', { id: 'error' }, error.message) : null,
    h(
      'form',
      {
        onSubmit: (e: { preventDefault(): void }) => {
          e.preventDefault();
          void sendMessage({ text });
          setText('');
        },
      },
      h('textarea', { name: 'text', value: text, onChange: (e: { target: { value: string } }) => setText(e.target.value) }),
      h('button', { type: 'submit', id: 'send', disabled: status !== 'ready' && status !== 'error' }, 'Send'),
      h('button', { type: 'button', id: 'stop', onClick: () => void stop() }, 'Stop'),
    ),
  );
}

createRoot(document.getElementById('root') as Element).render(h(Chat));
document.body.dataset.ready = 'true';
