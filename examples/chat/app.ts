/**
 * The chat example's web app: Stepwise's HTTP API and dashboard (`createServer`) with the chat
 * page beside them in one Hono app. The page runs `StepwiseChatTransport` of
 * `stepwise-engine/client` in the browser without a bundler: the client's modules are served as
 * JavaScript, compiled from this repository's sources on request (an application would bundle
 * the published package instead).
 *
 * The page gets an operator token from `/chat/config.json`: fine for a local example, not for a
 * site (there, sign people in and hand each a token of their own, or use the dashboard's session).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import ts from 'typescript';
import type { Engine } from '../../src/index.ts';
import { createServer } from '../../src/server/index.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const SRC = join(HERE, '../../src');
/** The source modules the page may load (the client and what it imports). */
const SERVED = /^(client\/[a-z-]+|chat-protocol)\.js$/;

export interface ChatApp {
  url: string;
  close(): Promise<void>;
}

export async function startChatApp(engine: Engine, options: { token: string; port?: number }): Promise<ChatApp> {
  const api = createServer(engine, { tokens: [{ name: 'chat-page', role: 'operator', token: options.token }] });
  const app = new Hono();
  app.get('/chat', (c) => c.html(readFileSync(join(HERE, 'page.html'), 'utf8')));
  app.get('/chat/config.json', (c) => c.json({ token: options.token, workflow: 'chat' }));
  app.get('/chat/lib/*', (c) => {
    const path = c.req.path.slice('/chat/lib/'.length);
    if (!SERVED.test(path)) return c.notFound();
    const source = readFileSync(normalize(join(SRC, path.replace(/\.js$/, '.ts'))), 'utf8');
    const out = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, rewriteRelativeImportExtensions: true, verbatimModuleSyntax: true },
    });
    return c.body(out.outputText, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-store' });
  });
  app.route('/', api.app);
  return new Promise<ChatApp>((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: options.port ?? 0, hostname: '127.0.0.1' }, (info: AddressInfo) =>
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            (server as Server).closeAllConnections();
            server.close(() => done());
          }),
      }),
    );
    server.on('error', reject);
  });
}
