// POST /api/tasks/bulk: a dry run counts, the action runs as the caller (its name in each task's
// log); a viewer may not, an operator may not delete in bulk; a bad filter is a 400.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const article = workflow('article', async (_ctx, input: { topic: string }) => input.topic);

describe('HTTP API: bulk actions', () => {
  it('counts, then cancels the matching tasks as the caller; refuses roles without the right and bad filters', async () => {
    const engine = makeEngine({ workflows: [article] });
    const server = createServer(engine, { tokens: TOKENS });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await engine.start(article, { topic: `t${i}` }, { tags: { tenant: i < 3 ? 'acme' : 'globex' } })).id);
    const body = { action: 'cancel', filter: { tags: { tenant: 'acme' }, status: ['pending'] } };
    expect((await call(server, 'POST', '/api/tasks/bulk', { as: 'vera', body })).status).toBe(403);
    const plan = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: { ...body, dryRun: true } });
    expect(plan.status).toBe(200);
    expect(plan.body).toMatchObject({ dryRun: true, matched: 3, acted: 3 });
    expect((await engine.count({ status: 'pending' })).pending).toBe(4);
    const done = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: { ...body, reason: 'duplicate run' } });
    expect(done.body).toMatchObject({ dryRun: false, matched: 3, acted: 3, failedCount: 0 });
    const t = await engine.get(ids[0] as string);
    expect(t).toMatchObject({ status: 'cancelled', cancelReason: 'duplicate run' });
    expect(t.history.find((e) => e.type === 'transition' && e.event === 'cancel')?.actor).toEqual({ kind: 'user', id: 'oscar' });
    expect((await engine.get(ids[3] as string)).status).toBe('pending');

    const del = { action: 'delete', filter: { status: 'cancelled' } };
    const refused = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: del });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('FORBIDDEN');
    expect((await call(server, 'POST', '/api/tasks/bulk', { as: 'ada', body: del })).body).toMatchObject({ matched: 3, acted: 3 });

    for (const bad of [{ action: 'explode', filter: {} }, { action: 'cancel' }, { action: 'cancel', filter: { tagz: {} } }, { action: 'cancel', filter: { status: 'done' } }]) {
      const r = await call(server, 'POST', '/api/tasks/bulk', { as: 'oscar', body: bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
    }
  });
});
