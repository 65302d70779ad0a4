// The AI SDK's own `useChat` hook (`@ai-sdk/react`, in React, in Chromium) on
// StepwiseChatTransport: the page (test/support/use-chat/page.ts) is bundled with Vite, served
// beside Stepwise's HTTP API, and runs the chat example's workflow on a worker against the offline
// stand-in model. A person sends a message and sees the answer arrive token by token; reloads the
// page mid-answer and sees `resume: true` pick the answer up through `reconnectToStream`, whole,
// with no gap and no repeat; presses Stop and sees the answer end and the session cancelled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Browser, Page } from 'playwright-core';
import { build } from 'vite';
import { Engine, type Worker } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { chat } from '../examples/chat/workflow.ts';
import { offlineAnswer } from '../examples/chat/offline-chat.ts';
import { startOfflineModel, type OfflineModel } from '../examples/research-agent/offline-model.ts';
import { chromiumAvailable, launchChromium } from './support/browser.ts';
import { eventually, waitForStatus } from './support/engine.ts';

const hasChromium = chromiumAvailable();
const TOKEN = 'use-chat-test-token-0123456789';

/** The page's module, bundled for the browser (React in its production build). */
async function bundlePage(): Promise<string> {
  const out = await build({
    configFile: false,
    logLevel: 'silent',
    mode: 'production',
    define: { 'process.env.NODE_ENV': JSON.stringify('production') },
    build: { write: false, minify: false, lib: { entry: join(import.meta.dirname, 'support/use-chat/page.ts'), formats: ['es'], fileName: 'page' } },
  });
  const outputs = (Array.isArray(out) ? out : [out]) as Array<{ output: Array<{ type: string; code?: string }> }>;
  const chunk = outputs[0]?.output.find((o) => o.type === 'chunk');
  if (!chunk?.code) throw new Error('vite build gave no chunk for the useChat page');
  return chunk.code;
}

describe.skipIf(!hasChromium)('useChat (@ai-sdk/react) on StepwiseChatTransport in Chromium', () => {
  let browser: Browser;
  let model: OfflineModel;
  let engine: Engine;
  let worker: Worker;
  let http: Server;
  let url: string;
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-use-chat-'));
  const asked: string[] = [];

  beforeAll(async () => {
    const code = await bundlePage();
    // Slow enough to reload or stop in the middle of an answer (~40 words).
    model = await startOfflineModel({ paceMs: 120, policy: (messages) => ({ answer: offlineAnswer(messages) }) });
    process.env.STEPWISE_CHAT_BASE_URL = model.baseURL;
    engine = new Engine({ store: `sqlite:${join(dir, 'chat.db')}`, workflows: [chat] });
    worker = engine.worker({ pollIntervalMs: 50 });
    await worker.start();
    const api = createServer(engine, { tokens: [{ name: 'chat-page', role: 'operator', token: TOKEN }] });
    const app = new Hono();
    app.get('/use-chat', (c) =>
      c.html(
        `<!doctype html><html><head><meta charset="utf-8"><title>useChat</title></head><body><div id="root"></div>` +
          `<script>window.stepwiseChat = { token: ${JSON.stringify(TOKEN)} };</script><script type="module" src="/use-chat/page.js"></script></body></html>`,
      ),
    );
    app.get('/use-chat/page.js', (c) => c.body(code, 200, { 'content-type': 'text/javascript; charset=utf-8' }));
    app.route('/', api.app);
    url = await new Promise<string>((resolve) => {
      http = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`)) as Server;
    });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    http?.closeAllConnections();
    await new Promise((r) => http?.close(r));
    await worker?.stop();
    await engine?.close();
    await model?.close();
    delete process.env.STEPWISE_CHAT_BASE_URL;
    rmSync(dir, { recursive: true, force: true });
  });

  const answers = (page: Page): Promise<string[]> => page.$$eval('#log li.assistant', (els) => els.map((e) => e.textContent ?? ''));
  const expected = (): string => offlineAnswer(asked.map((content) => ({ role: 'user', content })));

  async function open(): Promise<Page> {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${url}/use-chat`);
    await page.waitForSelector('body[data-ready=true][data-status=ready]');
    return page;
  }

  async function ask(page: Page, text: string): Promise<void> {
    asked.push(text);
    await page.fill('textarea[name=text]', text);
    await page.click('#send');
  }

  /** Waits until answer `n` shows some words but not all; returns what it shows. */
  async function midAnswer(page: Page, n: number): Promise<string> {
    let shown = '';
    await eventually(
      async () => {
        const all = await answers(page);
        shown = all.length === n ? (all.at(-1) as string) : '';
        return shown.split(' ').length >= 3;
      },
      20_000,
      'the first words of the answer',
    );
    expect(shown.length).toBeLessThan(expected().length);
    expect(expected().startsWith(shown)).toBe(true);
    return shown;
  }

  const settled = (page: Page, n: number): Promise<unknown> =>
    page.waitForFunction(`document.body.dataset.status === 'ready' && document.querySelectorAll('#log li.assistant').length === ${n}`, undefined, { timeout: 30_000 });

  it('sends a message and shows the answer token by token, then whole; a reload mid-answer resumes it with no gap and no repeat', async () => {
    const page = await open();
    asked.length = 0;
    await ask(page, 'What does durable mean?');
    const first = await midAnswer(page, 1);
    // Tokens arrive: later the same answer shows more of itself.
    await eventually(async () => ((await answers(page)).at(-1) ?? '').length > first.length, 20_000, 'more of the answer');
    await settled(page, 1);
    expect(await answers(page)).toEqual([expected()]);

    await ask(page, 'And after a crash?');
    await midAnswer(page, 2);
    await page.reload();
    await page.waitForSelector('body[data-ready=true]');
    // useChat's resume: the transport replays the answer in progress and follows it to its end.
    await settled(page, 2);
    expect(await answers(page)).toEqual([offlineAnswer([{ role: 'user', content: asked[0] as string }]), expected()]);
    expect(await page.$$eval('#log li', (els) => els.map((e) => e.className))).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(await page.$('#error')).toBeNull();
  });

  it("Stop ends the answer and cancels the session's task", async () => {
    const page = await open();
    asked.length = 0;
    await ask(page, 'Write a long essay.');
    const shown = await midAnswer(page, 1);
    // The session's task, as the transport remembers it for this tab's chat.
    const taskId = (await page.evaluate(`JSON.parse(sessionStorage.getItem('stepwise-chat:' + sessionStorage.getItem('chat-id'))).taskId`)) as string;
    expect((await engine.get(taskId)).status).toBe('running');
    await page.click('#stop');
    await page.waitForFunction(`document.body.dataset.status === 'ready'`, undefined, { timeout: 30_000 });
    await waitForStatus(engine, taskId, 'cancelled');
    // The answer stopped where it was: it never reached its end.
    const stopped = (await answers(page)).at(-1) ?? '';
    expect(stopped.startsWith(shown)).toBe(true);
    expect(stopped.length).toBeLessThan(expected().length);
  });
});
