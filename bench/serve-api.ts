// Stepwise's HTTP API (`createServer`) on a free port of 127.0.0.1 for the stream bench, with one
// viewer token: what a web app's backend serves its pages' streams from.
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Engine } from '../dist/index.js';
import { createServer } from '../dist/server/index.js';

export interface ServedApi {
  /** `http://127.0.0.1:<port>` */
  base: string;
  http: Server;
  close(): Promise<void>;
}

export async function serveApi(engine: Engine, token: string): Promise<ServedApi> {
  const api = createServer(engine, { tokens: [{ name: 'bench', role: 'viewer', token }], dashboard: false, mcp: false });
  let http!: Server;
  const base = await new Promise<string>((resolve) => {
    http = serve({ fetch: api.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`)) as Server;
  });
  return {
    base,
    http,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
