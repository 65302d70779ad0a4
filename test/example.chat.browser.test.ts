// The chat example (examples/chat) in Chromium: its page on StepwiseChatTransport, the web app in
// this process, the chat workflow on a worker process (the CLI's `stepwise worker`), the offline
// stand-in model. A person types and sees tokens arrive; reloads mid-answer and sees the answer go
// on without a gap or a repeat; the worker is SIGKILLed mid-answer and the answer starts over on a
// new worker; Stop ends an answer and cancels the session, and the next message goes on in a new
// session that knows the conversation.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { Engine } from '../src/index.ts';
import { startChatApp, type ChatApp } from '../examples/chat/app.ts';
import { offlineAnswer } from '../examples/chat/offline-chat.ts';
import { startOfflineModel, type OfflineModel } from '../examples/research-agent/offline-model.ts';
import { chat } from '../examples/chat/workflow.ts';
import { chromiumAvailable, launchChromium } from './support/browser.ts';
import { eventually, waitForStatus } from './support/engine.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnCli, type SpawnedWorker } from './support/processes.ts';

const hasChromium = chromiumAvailable();
const TOKEN = 'chat-example-token-0123456789';

describe.skipIf(!hasChromium)('the chat example in Chromium', () => {
  let browser: Browser;
  let model: OfflineModel;
  let engine: Engine;
  let app: ChatApp;
  let db: string;
  // One database for the file's tests (the per-test helpers remove theirs after each test).
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-chat-'));
  let worker: SpawnedWorker;
  /** What the user asked so far, in order: the stand-in's answer depends on the conversation. */
  const asked: string[] = [];

  const startWorker = (): SpawnedWorker =>
    spawnCli(['worker', 'examples/chat/workflow.ts', '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'], { STEPWISE_CHAT_BASE_URL: model.baseURL });

  beforeAll(async () => {
    // Slow enough to act in the middle of an answer (~40 words).
    model = await startOfflineModel({ paceMs: 120, policy: (messages) => ({ answer: offlineAnswer(messages) }) });
    db = `sqlite:${join(dir, 'chat.db')}`;
    engine = new Engine({ store: db, workflows: [chat] });
    app = await startChatApp(engine, { token: TOKEN });
    browser = await launchChromium();
  }, 60_000);

  // A worker process per test (the process helpers kill what a test spawned after it).
  beforeEach(() => {
    worker = startWorker();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await engine?.close();
    await model?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const lastAnswer = (page: Page): Promise<string> => page.$$eval('#log li.assistant', (els) => els.at(-1)?.textContent ?? '');
  /** The answer the stand-in gives after the questions asked so far. */
  const expected = (): string => offlineAnswer(asked.map((content) => ({ role: 'user', content })));

  /** Waits until the page shows `n` answers, the last one finished. */
  async function answered(page: Page, n: number): Promise<void> {
    await page.waitForFunction(
      `document.querySelectorAll('#log li.assistant').length === ${n} && document.body.dataset.answering === 'false' && document.getElementById('status').textContent === 'answered'`,
      undefined,
      { timeout: 30_000 },
    );
  }

  async function ask(page: Page, text: string): Promise<void> {
    asked.push(text);
    await page.fill('textarea[name=text]', text);
    await page.click('#send');
  }

  /** Waits until the last answer shows some words but not all of them. */
  async function midAnswer(page: Page): Promise<string> {
    let shown = '';
    await eventually(
      async () => {
        shown = await lastAnswer(page);
        return shown.split(' ').length >= 3;
      },
      20_000,
      'the first words of the answer',
    );
    expect(shown.length).toBeLessThan(expected().length);
    return shown;
  }

  it('streams an answer, and after a reload mid-answer goes on without a gap or a repeat', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.url}/chat`);
    await page.waitForSelector('body[data-ready=true]');
    await ask(page, 'What does durable mean?');
    const before = await midAnswer(page);
    expect(expected().startsWith(before)).toBe(true);
    await page.reload();
    await page.waitForSelector('#log li.user');
    await answered(page, 1);
    expect(await lastAnswer(page)).toBe(expected());
    expect(await page.textContent('#status')).toBe('answered');
  });

  it('starts the answer over on a new worker when its worker is SIGKILLed mid-answer', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.url}/chat`);
    await page.waitForSelector('body[data-ready=true]');
    asked.length = 0;
    await ask(page, 'Tell me about crashes.');
    await midAnswer(page);
    worker.child.kill('SIGKILL');
    expect((await worker.exited).signal).toBe('SIGKILL');
    worker = startWorker();
    await answered(page, 1);
    // The page shows the retried attempt's text, whole: the reset frame closed the text part of the
    // attempt that broke off, and the retry streamed into a new one.
    expect(await lastAnswer(page)).toBe(expected());
    const parts = await page.evaluate(`JSON.parse(sessionStorage.getItem('chat-messages')).at(-1).parts.map((p) => p.text)`);
    expect(parts).toHaveLength(2);
    expect(expected().startsWith((parts as string[])[0] as string)).toBe(true);
    expect((parts as string[])[1]).toBe(expected());
    // The same session answers the next message, knowing the first.
    await ask(page, 'And after that?');
    await answered(page, 2);
    expect(await lastAnswer(page)).toBe(expected());
    expect(expected()).toContain('answer 2 of a durable chat');
  });

  it('Stop ends the answer and cancels the session; the next message goes on in a new session with the conversation', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.url}/chat`);
    await page.waitForSelector('body[data-ready=true]');
    asked.length = 0;
    await ask(page, 'Write a long essay.');
    await midAnswer(page);
    const sessions = async () => (await engine.list({ workflow: 'chat', limit: 100 })).tasks;
    const before = await sessions();
    await page.click('#stop');
    await page.waitForFunction(`document.body.dataset.answering === 'false'`, undefined, { timeout: 30_000 });
    expect(await lastAnswer(page)).toBe('stopped');
    const stopped = (await sessions()).find((t) => t.status === 'cancelling' || t.status === 'cancelled');
    expect(stopped).toBeDefined();
    await waitForStatus(engine, stopped?.id as string, 'cancelled');
    // A new session, started with the conversation so far (the stopped answer's partial text included).
    await ask(page, 'Shorter, please.');
    await answered(page, 2);
    expect(await lastAnswer(page)).toBe(expected());
    const after = await sessions();
    expect(after.length).toBe(before.length + 1);
    const fresh = after.find((t) => !before.some((b) => b.id === t.id));
    const input = (await engine.get(fresh?.id as string)).input as { history: Array<{ role: string; text: string }> };
    expect(input.history.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(input.history[0]?.text).toBe('Write a long essay.');
  });
});
