// Search over HTTP: a start body takes tags; GET /api/tasks filters by tags, creation time, error
// code and text (a malformed filter is a 400 naming it); the dashboard's list filters by the same
// fields, keeps them in the URL (a view can be shared) and shows each task's tags as links.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const article = workflow('article', async (_ctx, input: { topic: string }) => input.topic);

describe('HTTP API and dashboard: tags and search', () => {
  it('starts tagged tasks and lists them by tags, time, text; refuses malformed filters with 400', async () => {
    const engine = makeEngine({ workflows: [article] });
    const server = createServer(engine, { tokens: TOKENS });
    const start = async (topic: string, tags?: Record<string, string>): Promise<string> => {
      const r = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic }, ...(tags ? { tags } : {}) } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as string;
    };
    const acme = await start('Tides', { tenant: 'acme', user: 'u1' });
    const globex = await start('Moons', { tenant: 'globex' });
    const untagged = await start('Comets');
    const ids = async (q: string): Promise<string[]> => {
      const r = await call(server, 'GET', `/api/tasks${q}`, { as: 'vera' });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return (r.body.tasks as Array<{ id: string }>).map((t) => t.id);
    };
    expect(await ids('?tags=tenant=acme')).toEqual([acme]);
    expect(await ids('?tags=tenant=acme,user=u1')).toEqual([acme]);
    expect(await ids('?tags=tenant=acme,user=u2')).toEqual([]);
    expect(await ids(`?createdAfter=${new Date(Date.now() - 3_600_000).toISOString()}`)).toEqual([untagged, globex, acme]);
    expect(await ids('?createdBefore=0')).toEqual([]);
    expect(await ids('?text=moons')).toEqual([globex]);
    const listed = await call(server, 'GET', '/api/tasks?tags=tenant=acme', { as: 'vera' });
    expect(listed.body.tasks[0].tags).toEqual({ tenant: 'acme', user: 'u1' });

    for (const q of ['?tags=tenant', '?tags=1x=y', '?createdAfter=yesterday', '?text=', '?tagz=a=b']) {
      const r = await call(server, 'GET', `/api/tasks${q}`, { as: 'vera' });
      expect(r.status, q).toBe(400);
      expect(r.body.error.code, q).toBe('INVALID_ARGUMENT');
    }
    const badStart = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'x' }, tags: { tenant: 7 } } });
    expect(badStart.status).toBe(400);

    const page = (await call(server, 'GET', '/?tags=tenant%3Dglobex&text=moo', { as: 'vera' })).body as string;
    expect(page).toContain(`/tasks/${globex}`);
    expect(page).not.toContain(`/tasks/${acme}`);
    expect(page).toContain('<input name="tags" value="tenant=globex"');
    expect(page).toContain('<input name="text" value="moo"');
    expect(page).toContain('<a class="tag" href="/?tags=tenant%3Dglobex">tenant=globex</a>');
    // An empty field of the submitted form is no filter.
    const all = (await call(server, 'GET', '/?status=&workflow=&tags=&text=&failedWith=&createdAfter=&createdBefore=', { as: 'vera' })).body as string;
    for (const id of [acme, globex, untagged]) expect(all).toContain(`/tasks/${id}`);
    const taskPage = (await call(server, 'GET', `/tasks/${acme}`, { as: 'vera' })).body as string;
    expect(taskPage).toContain('<dt>Tags</dt>');
  });
});
