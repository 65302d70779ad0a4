// Alerts over HTTP and in the dashboard: the alerts workers raised, newest first, filtered by kind
// (a bad kind is a 400 naming the kinds), readable by a viewer; the dashboard's page lists them
// with a link to what they are about.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const broken = workflow('broken', async (ctx) => ctx.step('call', () => Promise.reject(new Error('upstream broke'))), { retry: 1 });

describe('HTTP API and dashboard: alerts', () => {
  it('lists raised alerts by kind, pages them, and shows them on the dashboard', async () => {
    const engine = makeEngine({ workflows: [broken], alerts: { every: '100ms', failureRate: { window: '1h', threshold: 0.5, minFinished: 2 } } });
    const server = createServer(engine, { tokens: TOKENS });
    const worker = await startWorker(engine);
    try {
      for (let i = 0; i < 2; i++) await waitForStatus(engine, (await engine.start(broken, {})).id, 'failed');
      await eventually(async () => (await engine.alerts()).length === 1, 15_000, 'the failure-rate alert');
      const all = await call(server, 'GET', '/api/alerts', { as: 'vera' });
      expect(all.status).toBe(200);
      expect(all.body.alerts).toHaveLength(1);
      expect(all.body.alerts[0]).toMatchObject({ kind: 'failure-rate', subject: 'workflow:broken', workflow: 'broken', raisedBy: worker.id, data: { failed: 2, ended: 2 } });
      expect(all.body.nextCursor).toBeNull();
      expect((await call(server, 'GET', '/api/alerts?kind=crash-loop,stuck', { as: 'vera' })).body.alerts).toEqual([]);
      const page = await call(server, 'GET', '/api/alerts?kind=failure-rate&limit=1', { as: 'vera' });
      expect(page.body.nextCursor).toBe(all.body.alerts[0].id);
      expect((await call(server, 'GET', `/api/alerts?cursor=${page.body.nextCursor}`, { as: 'vera' })).body.alerts).toEqual([]);
      const bad = await call(server, 'GET', '/api/alerts?kind=failure', { as: 'vera' });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('INVALID_ARGUMENT');
      expect(JSON.stringify(bad.body.error)).toContain('failure-rate');
      expect((await call(server, 'GET', '/api/alerts', { as: null })).status).toBe(401);
      // The dashboard's page, with the kind filter in the URL.
      const html = await call(server, 'GET', '/alerts?kind=failure-rate', { as: 'vera' });
      expect(html.status).toBe(200);
      expect(html.body).toContain(`data-alert="${all.body.alerts[0].id}"`);
      expect(html.body).toContain('href="/?workflow=broken"');
      expect(html.body).toContain('of the 2 tasks started');
      expect((await call(server, 'GET', '/alerts?kind=budget', { as: 'vera' })).body).toContain('No alerts.');
      // The kind links keep the rest of the filter.
      const filtered = await call(server, 'GET', '/alerts?kind=failure-rate,stuck&workflow=broken', { as: 'vera' });
      expect(filtered.body).toContain('href="/alerts?kind=crash-loop&amp;workflow=broken"');
      expect(filtered.body).toContain('href="/alerts?workflow=broken"');
    } finally {
      await worker.stop();
    }
  });
});
