/**
 * @module server/listen
 * The app on a port of this machine (port 0: any free port), through @hono/node-server. Its URL
 * names 127.0.0.1 when the server listens on every address; `close()` ends open connections
 * (SSE streams included) before it resolves.
 */
import { serve, type ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Env } from './middleware.ts';

export interface Listening {
  url: string;
  port: number;
  close(): Promise<void>;
}

export function listen(app: Hono<Env>, options: { port?: number; hostname?: string }): Promise<Listening> {
  return new Promise((resolve, reject) => {
    let server: ServerType;
    try {
      server = serve({ fetch: app.fetch, port: options.port ?? 8080, ...(options.hostname ? { hostname: options.hostname } : {}) }, (info: AddressInfo) => {
        const host = info.family === 'IPv6' ? `[${info.address}]` : info.address;
        resolve({
          url: `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${info.port}`,
          port: info.port,
          close: () =>
            new Promise<void>((done) => {
              (server as Server).closeAllConnections?.();
              server.close(() => done());
            }),
        });
      });
      server.on('error', reject);
    } catch (e) {
      reject(e);
    }
  });
}
