/**
 * `npm run example:chat`: a chat page on a durable chat task. Starts the offline stand-in model
 * (unless OPENAI_API_KEY is set), an engine on SQLite with a worker for the chat workflow, and the
 * web app (the chat page at /chat, the dashboard at /, the HTTP API under /api), then prints the
 * address. Run workers elsewhere instead with `--no-worker` and
 * `npx stepwise worker examples/chat/workflow.ts --db sqlite:./.stepwise/chat.db` (with the same
 * STEPWISE_CHAT_BASE_URL); kill one mid-answer and watch the answer start over.
 */
import { randomBytes } from 'node:crypto';
import { Engine } from '../../src/index.ts';
import { startChatApp } from './app.ts';
import { startOfflineChat } from './offline-chat.ts';
import { chat } from './workflow.ts';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const withWorker = !args.includes('--no-worker');
  const store = process.env.STEPWISE_STORE ?? 'sqlite:./.stepwise/chat.db';
  const offline = process.env.OPENAI_API_KEY || process.env.STEPWISE_CHAT_BASE_URL ? null : await startOfflineChat();
  if (offline) process.env.STEPWISE_CHAT_BASE_URL = offline.baseURL;
  const engine = new Engine({ store, workflows: [chat] });
  if (withWorker) await engine.worker({ concurrency: 20 }).start();
  const token = process.env.STEPWISE_CHAT_TOKEN ?? randomBytes(18).toString('base64url');
  const port = Number(process.env.PORT ?? 0);
  const app = await startChatApp(engine, { token, ...(port ? { port } : {}) });
  console.log(`Chat page: ${app.url}/chat   (dashboard: ${app.url}/ with token ${token})`);
  if (offline) console.log(`Model: the offline stand-in at ${offline.baseURL} (STEPWISE_CHAT_BASE_URL for other workers)`);
  const stop = async (): Promise<void> => {
    await app.close();
    await engine.close();
    await offline?.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
